package api

import (
	"sort"
	"strings"
)

// GETRoutes returns the patterns of s's GET routes, for tests that must cover every one.
func GETRoutes(s *Server) []string {
	var out []string
	for p := range s.need {
		if strings.HasPrefix(p, "GET ") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
