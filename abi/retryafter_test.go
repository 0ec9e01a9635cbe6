package abi

import (
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Thu, 26 Nov 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Thursday, 26-Nov-26 12:00:10 GMT", 10 * time.Second, true},
		{"Thu Nov 26 12:00:05 2026", 5 * time.Second, true},
		{"Thu, 26 Nov 2026 11:00:00 GMT", 0, true}, // in the past
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"99999999999", math.MaxInt64, true},             // more seconds than a Duration holds
		{"99999999999999999999999", math.MaxInt64, true}, // more than 64 bits
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		if got, ok := ParseRetryAfter(tt.in, now); got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
