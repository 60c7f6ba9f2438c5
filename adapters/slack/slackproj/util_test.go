package slackproj_test

import "encoding/json"

func decodeArgs(b []byte, v any) error { return json.Unmarshal(b, v) }
