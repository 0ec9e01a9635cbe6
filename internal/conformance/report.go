package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/runtime/credentials"
)

// Result is one check.
type Result struct {
	Rule string
	Name string
	// Failure explains a failed check; "" means passed (or skipped).
	Failure string
	Skipped string
	// Trace is the requests of the call that broke the rule.
	Trace    []Exchange
	Duration time.Duration
}

// Passed reports whether the check passed.
func (r Result) Passed() bool { return r.Failure == "" && r.Skipped == "" }

// Report is the outcome of a run.
type Report struct {
	Module   string
	Results  []Result
	Duration time.Duration
	// Throttled is what the cloud's own rate limit cost the run; it
	// never fails a check.
	Throttled Throttling
	// Warm is what the warm phase counted; nil when it did not run.
	Warm *WarmReport
	// Requests is how many requests the run sent to the cloud; Capped
	// says MaxRequests withheld some.
	Requests    int
	Capped      bool
	MaxRequests int
	secrets     *credentials.SecretSet
}

// Failed counts the failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if res.Failure != "" {
			n++
		}
	}
	return n
}

// Rules returns the rules with at least one failed check, in order of
// first failure.
func (r *Report) Rules() []string {
	var rules []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Failure != "" && !seen[res.Rule] {
			seen[res.Rule] = true
			rules = append(rules, res.Rule)
		}
	}
	return rules
}

// WriteText writes the report for people: one line per check, and under a
// failure what broke the rule, credentials redacted.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "wasmccm test %s\n", r.Module)
	var passed, failed, skipped int
	for _, res := range r.Results {
		switch {
		case res.Failure != "":
			failed++
			fmt.Fprintf(&b, "FAIL %-20s %s\n", res.Rule, res.Name)
			for _, line := range strings.Split(res.Failure, "\n") {
				fmt.Fprintf(&b, "     %s\n", line)
			}
			for _, ex := range res.Trace {
				fmt.Fprintf(&b, "     request: %s\n", ex)
				for _, line := range ex.Bodies() {
					fmt.Fprintf(&b, "     %s\n", line)
				}
			}
		case res.Skipped != "":
			skipped++
			fmt.Fprintf(&b, "SKIP %-20s %s: %s\n", res.Rule, res.Name, res.Skipped)
		default:
			passed++
			fmt.Fprintf(&b, "ok   %-20s %s\n", res.Rule, res.Name)
		}
	}
	if r.Warm != nil {
		r.Warm.write(&b)
	}
	if t := r.Throttled; t.Count > 0 {
		fmt.Fprintf(&b, "the cloud answered 429 (its own rate limit) %d times: waited %s in total, %d reached the module and were not scored\n",
			t.Count, t.Waited.Round(time.Millisecond), t.Passed)
	}
	fmt.Fprintf(&b, "sent %d requests to the cloud\n", r.Requests)
	if r.Capped {
		fmt.Fprintf(&b, "stopped sending at the cap of %d requests (-max-requests): the checks after it are skipped\n", r.MaxRequests)
	}
	fmt.Fprintf(&b, "%d checks: %d passed, %d failed, %d skipped (%s)\n", len(r.Results), passed, failed, skipped, r.Duration.Round(time.Millisecond))
	if failed > 0 {
		fmt.Fprintf(&b, "FAILED rules: %s\n", strings.Join(r.Rules(), ", "))
	} else {
		b.WriteString("PASS\n")
	}
	_, err := io.WriteString(w, r.secrets.Redact(b.String()))
	return err
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the report as JUnit XML: one test case per check, its
// class the rule, so CI systems show which rule broke.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSuite{Name: "wasmccm conformance: " + r.Module, Tests: len(r.Results), Time: seconds(r.Duration)}
	for _, res := range r.Results {
		c := junitCase{Classname: res.Rule, Name: r.secrets.Redact(res.Name), Time: seconds(res.Duration)}
		switch {
		case res.Failure != "":
			suite.Failures++
			body := res.Failure
			for _, ex := range res.Trace {
				body += "\nrequest: " + ex.String()
				for _, line := range ex.Bodies() {
					body += "\n" + line
				}
			}
			first, _, _ := strings.Cut(res.Failure, "\n")
			c.Failure = &junitFailure{Message: r.secrets.Redact(first), Type: res.Rule, Body: r.secrets.Redact(body)}
		case res.Skipped != "":
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: res.Skipped}
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
