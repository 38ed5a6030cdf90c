package acctest

import "slices"

// Median is the middle value of xs (the mean of the two middle ones), for
// benchmarks that report the middle of alternating runs on a shared machine.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
