package soak

import "testing"

// TestKindsParse: every kind's definition is valid, so define does not fail a soak at setup.
func TestKindsParse(t *testing.T) {
	t.Parallel()
	for _, k := range kinds(func(body string) string { return body }) {
		if _, err := k.spec(); err != nil {
			t.Errorf("kind %s: %v", k.name, err)
		}
	}
}
