package awsfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// API versions and XML namespaces.
const (
	EC2Version   = "2016-11-15"
	ELBVersion   = "2012-06-01"
	ELBv2Version = "2015-12-01"
	ec2NS        = "http://ec2.amazonaws.com/doc/2016-11-15/"
	elbNS        = "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/"
	elbv2NS      = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
)

// apiError is an error answer: an HTTP status and the service's code.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{400, code, fmt.Sprintf(format, args...)}
}

// api is the service a request is for.
type api struct {
	prefix  string // key prefix of Requests
	service string // the SigV4 service
	ns      string
	actions map[string]func(*call) (any, *apiError)
}

// call is one request being served.
type call struct {
	c         *Cloud
	form      url.Values
	requestID string
}

func (a *api) writeError(w http.ResponseWriter, requestID string, e *apiError) {
	var body any
	if a.prefix == "ec2" {
		type xmlErr struct {
			Code    string
			Message string
		}
		body = struct {
			XMLName   xml.Name `xml:"Response"`
			Errors    []xmlErr `xml:"Errors>Error"`
			RequestID string
		}{Errors: []xmlErr{{e.code, e.message}}, RequestID: requestID}
	} else {
		typ := "Sender"
		if e.status >= 500 {
			typ = "Receiver"
		}
		body = struct {
			XMLName xml.Name `xml:"ErrorResponse"`
			NS      string   `xml:"xmlns,attr"`
			Error   struct {
				Type, Code, Message string
			}
			RequestID string `xml:"RequestId"`
		}{NS: a.ns, Error: struct{ Type, Code, Message string }{typ, e.code, e.message}, RequestID: requestID}
	}
	writeXML(w, e.status, body)
}

func writeXML(w http.ResponseWriter, status int, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		status, body = 500, []byte("<Response><Errors><Error><Code>InternalError</Code><Message>encoding the response failed</Message></Error></Errors></Response>")
	}
	body = append([]byte(xml.Header), body...)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// faultCode is the service's code for an injected failure's status.
func (a *api) faultCode(status int) string {
	switch {
	case status == 401:
		if a.prefix == "ec2" {
			return "AuthFailure"
		}
		return "InvalidClientTokenId"
	case status == 409:
		return "IncorrectState"
	case status == 423:
		return "ResourceInUse"
	case status == 429:
		if a.prefix == "ec2" {
			return "RequestLimitExceeded"
		}
		return "Throttling"
	case status == 500:
		if a.prefix == "ec2" {
			return "InternalError"
		}
		return "InternalFailure"
	}
	if a.prefix == "ec2" {
		return "Unavailable"
	}
	return "ServiceUnavailable"
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Handler returns the handler serving both APIs at every path. Each
// request is counted, authenticated (SigV4), put through the faults (with
// Request.Pattern set to its action's key, which Fault.Route selects) and
// served.
func (c *Cloud) Handler() http.Handler {
	apis := map[string]*api{
		EC2Version:   {prefix: "ec2", service: "ec2", ns: ec2NS, actions: ec2Actions},
		ELBVersion:   {prefix: "elasticloadbalancing", service: "elasticloadbalancing", ns: elbNS, actions: elbActions},
		ELBv2Version: {prefix: "elbv2", service: "elasticloadbalancing", ns: elbv2NS, actions: elbv2Actions},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		form, err := requestForm(r, body)
		c.mu.Lock()
		requestID := c.requestID()
		c.mu.Unlock()
		a := apis[form.Get("Version")]
		action := form.Get("Action")
		key := "unknown"
		if a != nil && action != "" {
			key = a.prefix + ":" + action
		}
		c.mu.Lock()
		c.requests[key]++
		c.mu.Unlock()
		if a == nil {
			a = apis[EC2Version]
			if err == nil {
				err = fmt.Errorf("missing or unknown Version %q", form.Get("Version"))
			}
		}
		if err != nil {
			a.writeError(w, requestID, badRequest("InvalidParameterValue", "%v", err))
			return
		}
		if e := c.verify(r, body, a.service); e != nil {
			c.mu.Lock()
			c.authFailures++
			c.mu.Unlock()
			if a.prefix == "ec2" && e.code != "RequestExpired" && e.code != "MissingParameter" {
				e.status, e.code = 401, "AuthFailure"
			}
			a.writeError(w, requestID, e)
			return
		}
		h := a.actions[action]
		if h == nil {
			a.writeError(w, requestID, badRequest("InvalidAction", "The action %s is not valid for this web service.", action))
			return
		}
		r.Pattern = key
		r.Body = io.NopCloser(bytes.NewReader(body))
		writeErr := func(w http.ResponseWriter, status int, msg string) {
			a.writeError(w, requestID, &apiError{status, a.faultCode(status), msg})
		}
		d := c.Faults.Decide(r)
		if !faultinject.Hold(w, r, d.Delay, writeErr) {
			return
		}
		d.Serve(w, r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			c.mu.Lock()
			out, e := h(&call{c: c, form: form, requestID: requestID})
			c.mu.Unlock()
			if e != nil {
				a.writeError(w, requestID, e)
				return
			}
			writeXML(w, 200, out)
		}), writeErr)
	})
}

// requestForm reads the Query parameters from the URL and, for a POST,
// the form-encoded body.
func requestForm(r *http.Request, body []byte) (url.Values, error) {
	form := r.URL.Query()
	if r.Method == http.MethodPost {
		if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			return form, fmt.Errorf("unsupported Content-Type %q", ct)
		}
		b, err := url.ParseQuery(string(body))
		if err != nil {
			return form, fmt.Errorf("malformed body: %v", err)
		}
		for k, v := range b {
			form[k] = append(form[k], v...)
		}
	}
	return form, nil
}

func (c *Cloud) requestID() string {
	c.seq++
	return fmt.Sprintf("fa4efa4e-%04x-4000-8000-%012x", c.seq&0xffff, c.seq)
}

// sigv4Algorithm is the only signing algorithm accepted.
const sigv4Algorithm = "AWS4-HMAC-SHA256"

// verify checks r's Signature Version 4 Authorization header: the access
// key, the credential scope (date, region, service), the date within 15
// minutes of the clock, and the signature recomputed from the canonical
// request with the secret key. The codes are ELB's (awsQuery): Handler
// maps them to EC2's AuthFailure.
func (c *Cloud) verify(r *http.Request, body []byte, service string) *apiError {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &apiError{403, "MissingAuthenticationToken", "Request is missing Authentication Token"}
	}
	rest, ok := strings.CutPrefix(auth, sigv4Algorithm+" ")
	if !ok {
		return &apiError{400, "IncompleteSignature", "Unsupported authorization algorithm"}
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	cred, signedHeaders, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || signedHeaders == "" || sig == "" || parts[4] != "aws4_request" {
		return &apiError{400, "IncompleteSignature", "Authorization header requires Credential, SignedHeaders and Signature"}
	}
	if parts[0] != c.opts.AccessKeyID {
		return &apiError{403, "InvalidClientTokenId", "The security token included in the request is invalid."}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return &apiError{400, "MissingParameter", "Request must contain a valid X-Amz-Date header"}
	}
	if d := c.opts.Now().Sub(t); d > 15*time.Minute || d < -15*time.Minute {
		if service == "ec2" {
			return &apiError{400, "RequestExpired", "Request has expired."}
		}
		return &apiError{403, "SignatureDoesNotMatch", "Signature expired: " + amzDate + " is now earlier than the allowed window"}
	}
	if parts[1] != amzDate[:8] || parts[2] != c.opts.Region || parts[3] != service {
		return &apiError{403, "SignatureDoesNotMatch", fmt.Sprintf("Credential should be scoped to a valid region and service: %s/%s/%s, not %s/%s/%s",
			amzDate[:8], c.opts.Region, service, parts[1], parts[2], parts[3])}
	}
	want := signature(c.opts.SecretAccessKey, canonicalRequest(r, body, signedHeaders), amzDate, strings.Join(parts[1:], "/"), parts[1], parts[2], parts[3])
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return &apiError{403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."}
	}
	return nil
}

// canonicalRequest builds SigV4's canonical request from r.
func canonicalRequest(r *http.Request, body []byte, signedHeaders string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(path + "\n")
	q := r.URL.Query()
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k)+"="+uriEncode(v))
		}
	}
	sort.Strings(pairs)
	b.WriteString(strings.Join(pairs, "&") + "\n")
	for _, h := range strings.Split(signedHeaders, ";") {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			vals = r.Header.Values(h)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	b.WriteString("\n" + signedHeaders + "\n")
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	b.WriteString(hash)
	return b.String()
}

func signature(secret, canonical, amzDate, scope, date, region, service string) string {
	sum := sha256.Sum256([]byte(canonical))
	toSign := sigv4Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// uriEncode encodes as SigV4 requires: every byte but A-Z a-z 0-9 - _ . ~.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '~' {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// list reads a Query list: prefix.1, prefix.2, ... (EC2) or
// prefix.member.1, ... (ELB); it stops at the first gap.
func (cl *call) list(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		n := strconv.Itoa(i)
		v, ok := cl.form[prefix+"."+n]
		if !ok {
			v, ok = cl.form[prefix+".member."+n]
		}
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// structs counts the structures of a Query list: prefix.N.<field>
// (EC2) or prefix.member.N.<field> (ELB); it returns each one's
// parameter prefix, up to the first N with no field.
func (cl *call) structs(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		n := strconv.Itoa(i)
		found := ""
		for _, p := range []string{prefix + "." + n + ".", prefix + ".member." + n + "."} {
			for k := range cl.form {
				if strings.HasPrefix(k, p) {
					found = p
					break
				}
			}
			if found != "" {
				break
			}
		}
		if found == "" {
			return out
		}
		out = append(out, found)
	}
}

func (cl *call) get(name string) string { return cl.form.Get(name) }

func (cl *call) required(name string) (string, *apiError) {
	v := cl.form.Get(name)
	if v == "" {
		return "", badRequest("MissingParameter", "The request must contain the parameter %s", name)
	}
	return v, nil
}

// intParam reads an optional integer parameter.
func (cl *call) intParam(name string, def int) (int, *apiError) {
	v := cl.form.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		code := "InvalidParameterValue"
		if v := cl.form.Get("Version"); v == ELBVersion || v == ELBv2Version {
			code = "ValidationError"
		}
		return 0, badRequest(code, "Invalid value %q for %s", v, name)
	}
	return n, nil
}

// tags reads prefix.N.Key / prefix.N.Value.
func (cl *call) tags(prefix string) map[string]string {
	out := map[string]string{}
	for _, p := range cl.structs(prefix) {
		if k := cl.form.Get(p + "Key"); k != "" {
			out[k] = cl.form.Get(p + "Value")
		}
	}
	return out
}

// filter is one EC2 Filter.N: a name and the values any of which matches.
type filter struct {
	name   string
	values []string
}

func (cl *call) filters() []filter {
	var out []filter
	for _, p := range cl.structs("Filter") {
		out = append(out, filter{cl.form.Get(p + "Name"), cl.list(p + "Value")})
	}
	return out
}

// matches reports whether any of have matches any value of f, values
// taking EC2's * and ? wildcards.
func (f filter) matches(have ...string) bool {
	for _, v := range f.values {
		for _, h := range have {
			if wildcard(v, h) {
				return true
			}
		}
	}
	return false
}

// matchTags applies a tag:<key>, tag-key or tag-value filter to tags; ok
// is false when f is not a tag filter.
func (f filter) matchTags(tags map[string]string) (match, ok bool) {
	switch {
	case strings.HasPrefix(f.name, "tag:"):
		v, has := tags[f.name[4:]]
		return has && f.matches(v), true
	case f.name == "tag-key":
		return slices.ContainsFunc(sortedKeys(tags), func(k string) bool { return f.matches(k) }), true
	case f.name == "tag-value":
		for _, v := range tags {
			if f.matches(v) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// matchFilters applies every filter to one object: tag filters to tags
// when the object is tagged, every other name to the values field
// returns for it (ok false: a name the object cannot be filtered by,
// which EC2 refuses). All filters must match.
func matchFilters(filters []filter, tags map[string]string, tagged bool, field func(name string) (values []string, ok bool)) (bool, *apiError) {
	for _, f := range filters {
		if m, isTag := f.matchTags(tags); isTag && tagged {
			if !m {
				return false, nil
			}
			continue
		}
		have, ok := field(f.name)
		if !ok {
			return false, invalidFilter(f.name)
		}
		if !f.matches(have...) {
			return false, nil
		}
	}
	return true, nil
}

// wildcard matches s against pattern, where * is any run and ? any one
// character.
func wildcard(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if wildcard(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && wildcard(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && wildcard(pattern[1:], s[1:])
}

func invalidFilter(name string) *apiError {
	return badRequest("InvalidParameterValue", "The filter '%s' is invalid", name)
}
