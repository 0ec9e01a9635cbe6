package hcloud

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// The API objects, reduced to the fields this provider reads. The API's
// full types are hcloud-go's hcloud/schema; these are kept small because
// decoding runs inside the guest.

type server struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	PublicNet struct {
		IPv4 *publicIP `json:"ipv4"`
		IPv6 *publicIP `json:"ipv6"` // IP is a /64 network
	} `json:"public_net"`
	PrivateNet []privateNet `json:"private_net"`
	ServerType struct {
		Name string `json:"name"`
	} `json:"server_type"`
	Location struct {
		Name string `json:"name"`
	} `json:"location"`
}

type publicIP struct {
	IP string `json:"ip"`
}

type privateNet struct {
	Network int64  `json:"network"`
	IP      string `json:"ip"`
}

type loadBalancer struct {
	ID        int64             `json:"id"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	PublicNet struct {
		Enabled bool `json:"enabled"`
		IPv4    struct {
			IP string `json:"ip"`
		} `json:"ipv4"`
		IPv6 struct {
			IP string `json:"ip"`
		} `json:"ipv6"`
	} `json:"public_net"`
	PrivateNet       []privateNet `json:"private_net"`
	LoadBalancerType struct {
		Name       string `json:"name"`
		MaxTargets int    `json:"max_targets"`
	} `json:"load_balancer_type"`
	Algorithm struct {
		Type string `json:"type"`
	} `json:"algorithm"`
	Services []lbService `json:"services"`
	Targets  []struct {
		Type   string `json:"type"`
		Server *struct {
			ID int64 `json:"id"`
		} `json:"server"`
		UsePrivateIP bool `json:"use_private_ip"`
	} `json:"targets"`
}

type network struct {
	ID      int64          `json:"id"`
	Name    string         `json:"name"`
	IPRange string         `json:"ip_range"`
	Routes  []networkRoute `json:"routes"`
}

type networkRoute struct {
	Destination string `json:"destination"`
	Gateway     string `json:"gateway"`
}

type action struct {
	ID      int64  `json:"id"`
	Command string `json:"command"`
	Status  string `json:"status"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// getByID fetches /<kind>/<id> and decodes the object under key. It
// returns found=false only for the API's own not_found answer.
func getByID[T any](ctx context.Context, p *Provider, what, kind, key string, id int64) (*T, bool, error) {
	var body map[string]json.RawMessage
	_, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: "/" + kind + "/" + strconv.FormatInt(id, 10), NotFound: true, Into: &body})
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v := new(T)
	if err := rest.Member(body, key, v); err != nil {
		return nil, false, errors.New("hcloud: " + what + ": " + err.Error())
	}
	return v, true, nil
}

// perPage is the API's largest page.
const perPage = "50"

// listAll fetches every page of /<kind> with the given filters and
// decodes the objects under kind. An answer without the list, and a
// listing shorter than the total the API announced, are errors, never a
// shorter list: what a listing lacks can look "gone".
func listAll[T any](ctx context.Context, p *Provider, what, kind string, filters ...rest.Param) ([]T, error) {
	return listPages[T](ctx, p, what, kind, false, filters)
}

// listComplete is listAll for a listing whose gaps would delete
// something: every page must carry the API's pagination, and the pages
// together the total it announced, or the listing is an error.
func listComplete[T any](ctx context.Context, p *Provider, what, kind string, filters ...rest.Param) ([]T, error) {
	return listPages[T](ctx, p, what, kind, true, filters)
}

func listPages[T any](ctx context.Context, p *Provider, what, kind string, strict bool, filters []rest.Param) ([]T, error) {
	var all []T
	for page := 1; ; {
		items, next, total, err := listPage[T](ctx, p, what, kind, page, strict, filters)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == 0 {
			// A listing that ends short of the total it announced missed
			// objects, which would then look deleted.
			if total >= 0 && total != len(all) {
				return nil, errors.New("hcloud: " + what + ": the API announced " + strconv.Itoa(total) +
					" entries and listed " + strconv.Itoa(len(all)) + "; the listing is incomplete")
			}
			return all, nil
		}
		page = next
	}
}

// listPage fetches one page of /<kind> and returns its objects, the next
// page's number (0 after the last) and the total of entries the API
// announced (-1 when it announced none). strict requires the total.
func listPage[T any](ctx context.Context, p *Provider, what, kind string, page int, strict bool, filters []rest.Param) (items []T, next, total int, err error) {
	var body map[string]json.RawMessage
	query := append([]rest.Param{{Name: "page", Value: strconv.Itoa(page)}, {Name: "per_page", Value: perPage}}, filters...)
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: "/" + kind, Query: query, Into: &body}); err != nil {
		return nil, 0, 0, err
	}
	if err := rest.Member(body, kind, &items); err != nil {
		return nil, 0, 0, errors.New("hcloud: " + what + ": " + err.Error())
	}
	var meta struct {
		Pagination *struct {
			NextPage     int  `json:"next_page"`
			TotalEntries *int `json:"total_entries"`
		} `json:"pagination"`
	}
	if raw, ok := body["meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, 0, 0, errors.New("hcloud: " + what + ": decoding \"meta\": " + err.Error())
		}
	}
	pg := meta.Pagination
	if strict && (pg == nil || pg.TotalEntries == nil) {
		return nil, 0, 0, errors.New("hcloud: " + what + ": the API's answer carries no pagination total, so the listing cannot be known complete")
	}
	total = -1
	if pg == nil {
		return items, 0, total, nil
	}
	if pg.TotalEntries != nil {
		total = *pg.TotalEntries
	}
	if pg.NextPage <= page {
		return items, 0, total, nil
	}
	return items, pg.NextPage, total, nil
}

// post sends an action-returning request (a body with "action") and
// waits for the action to finish.
func (p *Provider) post(ctx context.Context, what, path string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return errors.New("hcloud: " + what + ": encoding the request: " + err.Error())
	}
	var resp struct {
		Action *action `json:"action"`
	}
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "POST", Path: path, Body: raw, Into: &resp}); err != nil {
		return err
	}
	return p.wait(ctx, what, resp.Action)
}

// Polling of running actions: the first poll comes soon, as most actions
// finish within a second; later ones back off.
const (
	firstPoll = 100 * time.Millisecond
	maxPoll   = time.Second
	// retryRunning is the RetryAfter of a call whose action outlives it.
	retryRunning = 5 * time.Second
)

// wait polls a until it has finished. An action that fails is an error;
// one that would outlive the call's deadline becomes a RetryAfter, so the
// controller comes back once the cloud is done instead of timing out.
func (p *Provider) wait(ctx context.Context, what string, a *action) error {
	if a == nil {
		return errors.New("hcloud: " + what + ": the response holds no action")
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.callTimeout)
	}
	delay := firstPoll
	for {
		switch a.Status {
		case "success":
			return nil
		case "error":
			msg := "the action failed"
			if a.Error != nil {
				msg = a.Error.Message + " (" + a.Error.Code + ")"
			}
			return errors.New("hcloud: " + what + ": action " + a.Command + " " + strconv.FormatInt(a.ID, 10) + ": " + msg)
		}
		// Leave time for the poll request itself.
		if time.Until(deadline) < delay+firstPoll {
			return sdk.RetryAfter(retryRunning, "hcloud: "+what+": action "+a.Command+" "+strconv.FormatInt(a.ID, 10)+" is still running")
		}
		time.Sleep(delay)
		delay = min(2*delay, maxPoll)
		next, found, err := getByID[action](ctx, p, what+": polling action "+strconv.FormatInt(a.ID, 10), "actions", "action", a.ID)
		if err != nil {
			return err
		}
		if !found {
			return errors.New("hcloud: " + what + ": action " + strconv.FormatInt(a.ID, 10) + " vanished")
		}
		a = next
	}
}
