package scenarios

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIErasureWhileServingLeavesNoBytes is issue #46's erasure-on-disk check on the path that
// the Slack scenario does not take: no Slack, a waiting reason and a follow-up note among the
// personal strings, and the erasure run by casebook erase (another process) while serve runs.
// Once the server reports the storage clean-up that erasure caused, no file of the data directory
// holds any of the strings.
func TestCLIErasureWhileServingLeavesNoBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := acmeAdmin(t, dir)
	srv := start(t, dir)
	secrets := []string{"Quentin Zorblax", "qzorblax77@example.org", "Subject-Aubergine-4411", "Message-Cerulean-9182",
		"Note-Periwinkle-5521", "Waiting-Reason-Tangerine-3307", "FollowUp-Note-Saffron-8830"}
	body := fmt.Sprintf(`{"name":%q,"email":%q,"subject":%q,"message":%q}`, secrets[0], secrets[1], secrets[2], secrets[3])
	if code, m := srv.call(t, "POST", "/v1/public/acme/inquiries", "", "", "erase-cli-1", body); code != 202 {
		t.Fatalf("intake = %d %v", code, m)
	}
	id := firstInquiryID(t, srv, admin)
	path := "/v1/inquiries/" + id
	if code, m := srv.call(t, "POST", path+"/notes", admin, "", "", fmt.Sprintf(`{"body":%q}`, secrets[4])); code != 200 {
		t.Fatalf("note = %d %v", code, m)
	}
	code, claimed := srv.call(t, "POST", path+"/claim", admin, "", "", "")
	if code != 200 {
		t.Fatalf("claim = %d %v", code, claimed)
	}
	if code, m := srv.call(t, "POST", path+"/transitions", admin, fmt.Sprint(claimed["version"]), "", fmt.Sprintf(`{"to":"waiting","reason":%q}`, secrets[5])); code != 200 {
		t.Fatalf("waiting = %d %v", code, m)
	}
	if code, m := srv.call(t, "POST", path+"/follow-ups", admin, "", "", fmt.Sprintf(`{"in":"2h","note":%q}`, secrets[6])); code != 201 {
		t.Fatalf("follow-up = %d %v", code, m)
	}
	if code, d := srv.call(t, "GET", path+"?consistent=true", admin, "", "", ""); code != 200 || d["subject"] != secrets[2] {
		t.Fatalf("detail = %d %v", code, d)
	}
	holders := func() []string {
		var out []string
		if err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					out = append(out, filepath.Base(p)+" holds "+s)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if len(holders()) == 0 {
		t.Fatal("no file holds the strings before the erasure: the check below would prove nothing")
	}

	var erased map[string]any
	cli(t, dir, &erased, "erase", "--tenant", "acme", "--inquiry", id)
	if erased["erased"] != true {
		t.Fatalf("casebook erase printed %v", erased)
	}
	eventually(t, "the storage clean-up after the erasure", func() bool {
		res, err := http.Get(srv.base + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		m, err := io.ReadAll(res.Body)
		return err == nil && regexp.MustCompile(`(?m)^casebook_erasure_scrubs_total\{outcome="completed"\} [1-9]`).Match(m)
	})
	if h := holders(); len(h) > 0 {
		t.Fatalf("while the server runs, after the clean-up: %v", h)
	}
	if code, d := srv.call(t, "GET", path+"?consistent=true", admin, "", "", ""); code != 200 || d["erased"] != true {
		t.Fatalf("detail after the erasure = %d %v", code, d)
	}
}
