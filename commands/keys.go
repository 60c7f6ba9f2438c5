package commands

// CheckKey validates an idempotency key as every command does: at most MaxKeyLen bytes of printable
// ASCII without spaces; the empty key is valid.
func CheckKey(k string) error { return checkKey(k) }
