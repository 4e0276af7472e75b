package cli

import "strings"

// Suggest returns the candidate a mistyped word most likely meant: the one
// at the smallest edit distance (insertions, deletions, substitutions and
// swaps of neighbours) when that distance is small for the word's length,
// else a unique candidate the word is a prefix of; "" when none is close.
func Suggest(word string, candidates []string) string {
	best, bestD := "", 0
	limit := 1 + len(word)/6
	if limit > 3 {
		limit = 3
	}
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	if best != "" || len(word) < 2 {
		return best
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, word) {
			if best != "" {
				return ""
			}
			best = c
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
