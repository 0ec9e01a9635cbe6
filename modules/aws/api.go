package aws

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// The Query API versions the official CCM's SDK speaks.
const (
	ec2Version = "2016-11-15"
	elbVersion = "2012-06-01"
)

// throttleDelay is how long a throttled call asks the controllers to wait
// when the API names no delay: EC2 signals throttling with an error code,
// not a Retry-After header.
const throttleDelay = 5 * time.Second

// queryAPI reaches one AWS Query-protocol API: form-encoded POSTs, XML
// answers. The host signs each request for service and region with the
// named credential.
type queryAPI struct {
	host                       sdk.Host
	endpoint, version, service string
	region, credential         string
	timeout                    time.Duration
}

// apiError is an error answer of the API.
type apiError struct {
	what    string
	status  int32
	code    string
	message string
}

func (e *apiError) Error() string {
	return "aws: " + e.what + ": " + strconv.Itoa(int(e.status)) + " " + e.code + ": " + e.message
}

// absent reports an error answer that proves the object does not exist:
// the API's own not-found codes (InvalidInstanceID.NotFound,
// InvalidRoute.NotFound, ...), never a status alone.
func absent(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.status == 400 && strings.HasSuffix(e.code, ".NotFound")
}

// call performs action with params and returns the answer's root
// element, <action>Response.
func (a *queryAPI) call(ctx context.Context, what, action string, params url.Values) (*xmltree.Element, error) {
	if a.endpoint == "" {
		return nil, errors.New("aws: " + what + ": the provider is not initialized")
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.New("aws: " + what + ": " + err.Error())
	}
	params.Set("Action", action)
	params.Set("Version", a.version)
	req := &abi.HTTPRequest{Method: "POST", URL: a.endpoint + "/", Body: []byte(params.Encode()), Headers: []abi.Header{
		{Name: "Content-Type", Value: "application/x-www-form-urlencoded; charset=utf-8"},
		{Name: abi.HeaderCredential, Value: a.credential},
		{Name: abi.HeaderSigV4Service, Value: a.service},
		{Name: abi.HeaderSigV4Region, Value: a.region},
	}, TimeoutMillis: rest.TimeoutMillis(ctx, a.timeout)}
	if strings.HasPrefix(action, "Describe") {
		// A read, which the host may share with an identical one in flight.
		sdk.MarkReadOnly(req)
	}
	resp, err := a.host.HTTP(req)
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error)
	}
	if err != nil {
		return nil, errors.New("aws: " + what + ": " + action + ": no response: " + err.Error())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, a.errorOf(what, action, resp)
	}
	root, err := xmltree.Parse(resp.Body)
	if err == nil && root.Name != action+"Response" {
		err = errors.New("the answer is a <" + root.Name + ">, not a <" + action + "Response>")
	}
	if err != nil {
		return nil, errors.New("aws: " + what + ": " + action + ": decoding the " + strconv.Itoa(int(resp.StatusCode)) + " answer: " + err.Error())
	}
	return root, nil
}

// each performs a listing action page by page, following NextToken (EC2)
// or NextMarker (ELB), and hands every page's root to visit. A failed
// page fails the listing: a partial list must never read as a complete
// one.
func (a *queryAPI) each(ctx context.Context, what, action string, params url.Values, visit func(page *xmltree.Element)) error {
	for {
		page, err := a.call(ctx, what, action, params)
		if err != nil {
			return err
		}
		visit(page)
		if token := page.TextOf("nextToken"); token != "" {
			params.Set("NextToken", token)
		} else if marker := page.Child(action + "Result").TextOf("NextMarker"); marker != "" {
			params.Set("Marker", marker)
		} else {
			return nil
		}
	}
}

// result performs an ELB action and returns its <action>Result.
func (a *queryAPI) result(ctx context.Context, what, action string, params url.Values) (*xmltree.Element, error) {
	root, err := a.call(ctx, what, action, params)
	if err != nil {
		return nil, err
	}
	return root.Child(action + "Result"), nil
}

// do performs an action that changes something and answers
// <return>true</return>; any other answer is an error.
func (a *queryAPI) do(ctx context.Context, what, action string, params url.Values) error {
	root, err := a.call(ctx, what, action, params)
	if err == nil && root.TextOf("return") != "true" {
		err = errors.New("aws: " + what + ": " + action + " answered return=" + strconv.Quote(root.TextOf("return")))
	}
	return err
}

// errorOf maps an error answer: throttling becomes sdk.RetryAfter, which
// the controllers honour; everything else an *apiError.
func (a *queryAPI) errorOf(what, action string, resp *abi.HTTPResponse) error {
	e := &apiError{what: what + ": " + action, status: resp.StatusCode, code: "unparsable error", message: rest.Excerpt(resp.Body)}
	if root, err := xmltree.Parse(resp.Body); err == nil {
		// EC2 answers <Response><Errors><Error>, ELB <ErrorResponse><Error>.
		first := root.Child("Errors").Child("Error")
		if first == nil {
			first = root.Child("Error")
		}
		if first != nil {
			e.code, e.message = first.TextOf("Code"), first.TextOf("Message")
		}
	}
	if e.code == "RequestLimitExceeded" || e.code == "Throttling" || resp.StatusCode == 429 {
		delay := throttleDelay
		for _, h := range resp.Headers {
			if strings.EqualFold(h.Name, "Retry-After") {
				if d, ok := rest.RetryAfterHeader(h.Value); ok {
					delay = d
				}
			}
		}
		return sdk.RetryAfter(delay, e.Error())
	}
	return e
}

// filters adds EC2 Filter.N parameters, one value each.
func filters(params url.Values, nameValues ...string) url.Values {
	for i := 0; i+1 < len(nameValues); i += 2 {
		n := strconv.Itoa(i/2 + 1)
		params.Set("Filter."+n+".Name", nameValues[i])
		params.Set("Filter."+n+".Value.1", nameValues[i+1])
	}
	return params
}

// anyOf is an EC2 filter matching any of values. Unlike a list of IDs, a
// filter does not fail on an ID the API does not know.
func anyOf(name string, values []string) url.Values {
	return list(url.Values{"Filter.1.Name": {name}}, "Filter.1.Value", values)
}

// list adds a Query list: prefix.1, prefix.2, ... (EC2 writes
// "InstanceId.1", ELB "Subnets.member.1", so prefix carries the
// ".member" where the API wants it).
func list(params url.Values, prefix string, values []string) url.Values {
	for i, v := range values {
		params.Set(prefix+"."+strconv.Itoa(i+1), v)
	}
	return params
}
