package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestNormalizeEmailAccepts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  Dana@Example.COM ":      "dana@example.com",
		"dana+desk@example.com":    "dana+desk@example.com",
		"Ünal@example.com":         "Ünal@example.com",      // only ASCII letters are folded
		"rene\u0301@example.com":   "ren\u00e9@example.com", // NFC: e + U+0301 is é
		"почта@пример.рф":          "почта@пример.рф",       // one script per part
		"ИВАН@example.com":         "ИВАН@example.com",
		"tanaka.太郎@example.jp":     "tanaka.太郎@example.jp", // Latin beside Han, as TR39 allows
		"jörg@bücher.example":      "jörg@bücher.example",
		"\u01f0ohn@example.com":    "\u01f0ohn@example.com", // ǰ folds to j + caron, which NFC composes back
		"":                         "",
		"no-at-sign":               "no-at-sign", // the caller checks the syntax
		"Zoë.O'Brien@Example.org":  "zoë.o'brien@example.org",
		"ωμέγα@example.gr":         "ωμέγα@example.gr",
		"kate@EXAMPLE.com\u00a0\t": "kate@example.com", // trimmed: surrounding no-break space too
	} {
		got, err := auth.NormalizeEmail(in)
		if err != nil || got != want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestNormalizeEmailRefusesLookAlikes(t *testing.T) {
	t.Parallel()
	for in, why := range map[string]string{
		"admİn@example.com":                 "U+0130",
		"adm\u0131n@example.com":            "U+0131",
		"\u212Aate@example.com":             "U+212A",
		"ro\u017Fe@example.com":             "U+017F",
		"stra\u00dfe@example.de":            "U+00DF",
		"\uff41dmin@example.com":            "U+FF41",
		"admin\uff20example.com":            "U+FF20",
		"\ufb01nance@example.com":           "U+FB01",
		"admin\u00b2@example.com":           "U+00B2",
		"adm\u0456n@example.com":            "Cyrillic", // і
		"\u0430dmin@example.com":            "Cyrillic", // а
		"admin@ex\u0430mple.com":            "Cyrillic",
		"\u03bfscar@example.com":            "Greek", // ο
		"i\u0307van@example.com":            "combining mark",
		"ad\u200bmin@example.com":           "U+200B",
		"ad\u00admin@example.com":           "U+00AD",
		"ad min@example.com":                "space",
		"admin@example.com\u202e":           "U+202E",
		strings.Repeat("a", 250) + "@x.org": "no address is over 254",
	} {
		got, err := auth.NormalizeEmail(in)
		if desk.ErrorCode(err) != desk.Invalid || !strings.Contains(desk.ErrorMessage(err), why) || desk.FieldsOf(err)["email"] == "" {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want it refused naming %s on the email field", in, got, err, why)
		}
	}
}

// A look-alike of a user's address is refused at every door of package auth, never folded into
// the user's: lower() in the database's collation made "admİn" log in as "admin".
func TestLookAlikeEmailsReachNoAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := auth.NewService(pgtest.New(t))
	admin, err := s.CreateUser(ctx, auth.NewUser{Email: " Admin@Example.com ", DisplayName: "Ada", Role: auth.RoleAdmin, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	if admin.Email != "admin@example.com" {
		t.Errorf("stored email %q, want admin@example.com", admin.Email)
	}
	if _, err := s.CreateUser(ctx, auth.NewUser{Email: "kate@example.com", DisplayName: "Kate", Role: auth.RoleAgent, Password: "long-enough"}); err != nil {
		t.Fatal(err)
	}

	for _, email := range []string{"admİn@example.com", "\u212Aate@example.com", "ADM\u0130N@EXAMPLE.COM", "\uff41dmin@example.com", "\u0430dmin@example.com"} {
		if u, err := s.Authenticate(ctx, email, "long-enough", "192.0.2.1"); desk.ErrorCode(err) != desk.Invalid {
			t.Errorf("login as %q = %+v, %v; want it refused as Invalid", email, u, err)
		}
		if u, err := s.UserByEmail(ctx, email); err == nil {
			t.Errorf("UserByEmail(%q) found %s", email, u.Email)
		}
		if p, err := s.PersonByEmail(ctx, email); err == nil {
			t.Errorf("PersonByEmail(%q) found %s", email, p.Email)
		}
		if _, err := s.CreateUser(ctx, auth.NewUser{Email: email, DisplayName: "Mallory", Role: auth.RoleAgent, Password: "long-enough"}); desk.FieldsOf(err)["email"] == "" {
			t.Errorf("creating %q: %v, want it refused naming the email field", email, err)
		}
	}
	if u, err := s.Authenticate(ctx, "  ADMIN@example.COM", "long-enough", "192.0.2.1"); err != nil || u.ID != admin.ID {
		t.Errorf("login in another case of ASCII = %+v, %v; want the admin", u, err)
	}
	if _, err := s.CreateUser(ctx, auth.NewUser{Email: "KATE@example.com", DisplayName: "Kate", Role: auth.RoleAgent, Password: "long-enough"}); desk.ErrorCode(err) != desk.Conflict {
		t.Errorf("a second kate in capitals: %v, want Conflict", err)
	}
}
