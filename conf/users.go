package conf

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// UserRoles are the roles a line of the users file may give, from the least to the most
// allowed: a viewer reads; an operator also kills, reruns, stops, signals and triggers, and
// enables and disables schedules; an admin also stores definitions, submits, backfills and
// manages pools and users.
var UserRoles = []string{"viewer", "operator", "admin"}

// MaxUserName is the longest user name accepted, in bytes.
const MaxUserName = 128

// tokenHashPrefix starts the third field of a users file line.
const tokenHashPrefix = "sha256:"

// User is one line of the users file.
type User struct {
	Name string
	Role string
	// TokenHash is the SHA-256 of the user's token: the file never holds the token itself.
	TokenHash [sha256.Size]byte
	// Line is the line of the file the user is on.
	Line int
}

// String formats u as a line of the users file, without the newline.
func (u User) String() string {
	return u.Name + " " + u.Role + " " + tokenHashPrefix + hex.EncodeToString(u.TokenHash[:])
}

// CheckUserName reports why name cannot be a user's name: empty, longer than [MaxUserName]
// bytes, not UTF-8, holding a space or a control character (the file separates fields by
// spaces; logs and pages show the name), or starting with # (a comment in the file).
func CheckUserName(name string) error {
	switch {
	case name == "":
		return errors.New("empty user name")
	case len(name) > MaxUserName:
		return fmt.Errorf("user name of %d bytes: at most %d", len(name), MaxUserName)
	case !utf8.ValidString(name):
		return errors.New("user name is not UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("user name %q holds a space or a control character", name)
	case strings.HasPrefix(name, "#"):
		return fmt.Errorf("user name %q starts with #, which the users file reads as a comment", name)
	}
	return nil
}

// CheckUserRole reports why role is not one of [UserRoles].
func CheckUserRole(role string) error {
	if !slices.Contains(UserRoles, role) {
		return fmt.Errorf("role %q: want one of %s", role, strings.Join(UserRoles, ", "))
	}
	return nil
}

// ReadUsersFile reads a users file (see [API.UsersFile]). A file that does not exist is
// reported with an error satisfying errors.Is(err, fs.ErrNotExist).
func ReadUsersFile(path string) ([]User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read users file: %w", err)
	}
	defer f.Close()
	users, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return users, nil
}

// ParseUsers reads the lines of a users file: "NAME ROLE sha256:HEX" separated by spaces or
// tabs, where HEX is the 64 hexadecimal digits of the SHA-256 of the user's token. Blank
// lines and lines starting with # are skipped, and a # field after the three ends the line.
// The first malformed line, a name given twice or a token given to two users is an error
// naming its line.
func ParseUsers(r io.Reader) ([]User, error) {
	var users []User
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 3 && strings.HasPrefix(fields[3], "#") {
			fields = fields[:3]
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: %d fields; want NAME ROLE sha256:HEX", n, len(fields))
		}
		u := User{Name: fields[0], Role: fields[1], Line: n}
		if err := CheckUserName(u.Name); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := CheckUserRole(u.Role); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		digits, ok := strings.CutPrefix(fields[2], tokenHashPrefix)
		raw, err := hex.DecodeString(digits)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: token hash %q: want sha256: and 64 hexadecimal digits", n, cut(fields[2], 80))
		}
		copy(u.TokenHash[:], raw)
		if prev, ok := names[u.Name]; ok {
			return nil, fmt.Errorf("line %d: user %q is already on line %d", n, u.Name, prev)
		}
		if prev, ok := hashes[u.TokenHash]; ok {
			return nil, fmt.Errorf("line %d: the same token as the user on line %d", n, prev)
		}
		names[u.Name], hashes[u.TokenHash] = n, n
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return users, nil
}

// cut shortens s to at most n bytes for a message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
