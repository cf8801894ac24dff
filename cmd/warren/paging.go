package main

import "fmt"

// allPages follows X-Next-Token until the last page. fetch gets the token
// of the page to fetch ("" for the first) and returns that page and the
// next token.
func allPages[T any](what string, fetch func(token string) ([]T, string, error)) ([]T, error) {
	all := []T{}
	seen := map[string]bool{}
	token := ""
	for {
		page, next, err := fetch(token)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		// A server that hands back a token it already gave would loop us
		// forever; stop and say so.
		if seen[next] {
			return nil, fmt.Errorf("list %s: the server repeated page token %q", what, next)
		}
		seen[next] = true
		token = next
	}
}
