package simcloud

import (
	"context"
	"errors"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// maxClusterPrefix bounds the cluster-name part of route names, so that a
// name hint (a node UID, 36 characters) always fits simcloud's 128.
const maxClusterPrefix = 63

// route is a simcloud route.
type route struct {
	Name            string `json:"name"`
	DestinationCIDR string `json:"destinationCIDR"`
	TargetInstance  string `json:"targetInstance"`
	TargetName      string `json:"targetName"`
	Blackhole       bool   `json:"blackhole"`
}

// routePrefix is the prefix of the names of this cluster's routes: the
// cluster name made a valid simcloud name, and a dash. Routes are named
// "<cluster>-<name hint>" so that clusters sharing a cloud account list,
// and therefore delete, only their own routes.
func routePrefix(cluster string) string {
	b := make([]byte, 0, len(cluster)+1)
	for i := 0; i < len(cluster) && len(b) < maxClusterPrefix; i++ {
		c := cluster[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.':
			if len(b) == 0 {
				continue // names start with a letter or digit
			}
		default:
			if len(b) == 0 {
				continue
			}
			c = '-'
		}
		b = append(b, c)
	}
	if len(b) == 0 {
		return ""
	}
	return string(append(b, '-'))
}

// routeName is the cloud name of the route created for nameHint.
func (p *Provider) routeName(nameHint string) (string, error) {
	b := []byte(p.routePrefix)
	for i := 0; i < len(nameHint); i++ {
		c := nameHint[i]
		if !(unreserved(c) && c != '~') {
			c = '-'
		}
		b = append(b, c)
	}
	if len(b) > 128 {
		b = b[:128]
	}
	name := string(b)
	if nameHint == "" || !validName(name) {
		return "", errors.New("simcloud: cannot name a route after the name hint " + quote(nameHint))
	}
	return name, nil
}

// ListRoutes lists this cluster's routes. A route whose target instance no
// longer exists is reported as a blackhole, with no target node, so that
// the route controller deletes it.
func (p *Provider) ListRoutes(ctx context.Context, _ string) ([]abi.Route, error) {
	var list routeList
	if _, err := p.api.Do(ctx, &rest.Request{What: "listing routes", Method: "GET", Path: "/v1/routes", Into: &list}); err != nil {
		return nil, err
	}
	out := make([]abi.Route, 0, len(list))
	for _, r := range list {
		if !strings.HasPrefix(r.Name, p.routePrefix) {
			continue
		}
		ar := abi.Route{Name: r.Name, DestinationCIDR: r.DestinationCIDR, Blackhole: r.Blackhole}
		if !r.Blackhole {
			ar.TargetNode = r.TargetName
		}
		out = append(out, ar)
	}
	return out, nil
}

// CreateRoute creates a route for route.DestinationCIDR to the instance
// named route.TargetNode, named after nameHint (the node's UID). Creating a
// route that already exists identically is success, so a create whose
// response was lost can be retried.
func (p *Provider) CreateRoute(ctx context.Context, _ string, nameHint string, rt *abi.Route) error {
	name, err := p.routeName(nameHint)
	if err != nil {
		return err
	}
	what := "creating route " + name + " for " + rt.DestinationCIDR + " to node " + quote(rt.TargetNode)
	if rt.TargetNode == "" || rt.DestinationCIDR == "" {
		return errors.New("simcloud: " + what + ": the route needs a target node and a destination CIDR")
	}
	w := jsonWriter{b: make([]byte, 0, 128)}
	w.raw("{")
	w.key("name", true)
	w.str(name)
	w.key("destinationCIDR", false)
	w.str(rt.DestinationCIDR)
	w.key("targetName", false)
	w.str(rt.TargetNode)
	w.raw("}")
	req := &rest.Request{What: what, Method: "POST", Path: "/v1/routes", Body: w.b, Accept: []int32{409}}
	resp, err := p.api.Do(ctx, req)
	if err != nil {
		return err
	}
	if resp.StatusCode == 409 {
		conflict := p.api.Error(req, resp)
		existing, err := p.getRoute(ctx, what, name)
		if err != nil {
			// The lookup's failure decides the status (a 429 stays
			// RetryAfter); the message keeps the conflict too.
			return &thenError{first: conflict, err: err}
		}
		if existing != nil && !existing.Blackhole && existing.DestinationCIDR == rt.DestinationCIDR && existing.TargetName == rt.TargetNode {
			p.logf(abi.LogDebug, "route "+name+" already exists as asked")
			return nil
		}
		if existing != nil {
			target := quote(existing.TargetName)
			if existing.Blackhole {
				target = "a terminated instance (" + existing.TargetInstance + ")"
			}
			return errors.New(conflict.Error() + " (route " + name + " exists for " + existing.DestinationCIDR + " to " + target + ")")
		}
		return conflict
	}
	p.logf(abi.LogInfo, "created route "+name+" for "+rt.DestinationCIDR+" to node "+quote(rt.TargetNode))
	return nil
}

// getRoute gets a route by name; (nil, nil) means the cloud said it does
// not exist.
func (p *Provider) getRoute(ctx context.Context, what, name string) (*route, error) {
	return getOne[route](p, ctx, what, "/v1/routes/"+rest.PathEscape(name))
}

// DeleteRoute deletes the route named route.Name; one already gone is
// success.
func (p *Provider) DeleteRoute(ctx context.Context, _ string, rt *abi.Route) error {
	what := "deleting route " + rt.Name + " for " + rt.DestinationCIDR
	if rt.Name == "" {
		return errors.New("simcloud: " + what + ": the route has no name")
	}
	_, err := p.api.Do(ctx, &rest.Request{What: what, Method: "DELETE", Path: "/v1/routes/" + rest.PathEscape(rt.Name), NotFound: true})
	if errors.Is(err, sdk.ErrNotFound) {
		p.logf(abi.LogDebug, "route "+rt.Name+" was already gone")
		return nil
	}
	if err != nil {
		return err
	}
	p.logf(abi.LogInfo, "deleted route "+rt.Name+" for "+rt.DestinationCIDR)
	return nil
}

// thenError is err, which followed first: its message names both, and it
// unwraps to err, whose kind (RetryAfter, not found) is the answer's.
type thenError struct{ first, err error }

func (e *thenError) Error() string { return e.first.Error() + "; then " + e.err.Error() }
func (e *thenError) Unwrap() error { return e.err }
