// Command queryapi is a provider for a query-style API (every call POST /
// with Action=... form fields, JSON answers, NextToken paging), written
// from modules/README.md alone: rest.Request's Form, and a cache.Snapshot
// paged by token. The conformance suite's own tests run it against
// conformancetest.QueryAPI, a fake of such a cloud; it must pass.
//
// An instance is looked up in the snapshot, and read directly by ID when
// the snapshot misses it or cannot be listed: only that read's 404, to a
// request naming the instance in its form body, makes it gone.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

const providerIDPrefix = "queryapi://"

type instance struct {
	ID    string `json:"InstanceId"`
	Name  string `json:"Name"`
	Type  string `json:"InstanceType"`
	Zone  string `json:"Zone"`
	State string `json:"State"`
}

type provider struct {
	host      sdk.Host
	api       rest.Client
	instances cache.Snapshot
}

func (p *provider) Init(_ context.Context, _ string, raw []byte) error {
	var cfg struct {
		Endpoint string `json:"endpoint"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Endpoint == "" {
		return errors.New("queryapi: the provider config needs an endpoint")
	}
	p.api = rest.Client{Host: p.host, Name: "queryapi", BaseURL: strings.TrimSuffix(cfg.Endpoint, "/"), Credential: "token", Timeout: 10 * time.Second}
	p.instances = cache.Snapshot{Host: p.host, Prefix: "instances", ListByToken: p.listPage}
	return nil
}

// describe sends DescribeInstances with params.
func (p *provider) describe(ctx context.Context, what string, notFound bool, params ...rest.Param) ([]instance, string, error) {
	var out struct {
		Instances []instance `json:"Instances"`
		NextToken string     `json:"NextToken"`
	}
	form := append([]rest.Param{{Name: "Action", Value: "DescribeInstances"}}, params...)
	_, err := p.api.Do(ctx, &rest.Request{What: what, Method: "POST", Path: "/", Form: form, NotFound: notFound, Into: &out})
	return out.Instances, out.NextToken, err
}

func (p *provider) listPage(ctx context.Context, token string) (*cache.Page, error) {
	params := []rest.Param{{Name: "MaxResults", Value: "2"}}
	if token != "" {
		params = append(params, rest.Param{Name: "NextToken", Value: token})
	}
	list, next, err := p.describe(ctx, "listing instances", false, params...)
	if err != nil {
		return nil, err
	}
	pg := &cache.Page{NextToken: next, Total: -1}
	for _, in := range list {
		raw, _ := json.Marshal(in)
		pg.Items = append(pg.Items, cache.Item{ID: in.ID, Name: in.Name, Value: raw})
	}
	return pg, nil
}

// find returns the node's instance, nil when the cloud answered 404 to a
// read of its ID.
func (p *provider) find(ctx context.Context, node *abi.Node) (*instance, error) {
	var raw []byte
	var err error
	if node.ProviderID == "" {
		raw, err = p.instances.ByName(ctx, node.Name, 10*time.Second)
		if errors.Is(err, cache.ErrNotListed) {
			return nil, sdk.NotFound("queryapi: no instance is named " + strconv.Quote(node.Name))
		}
	} else {
		id, ok := strings.CutPrefix(node.ProviderID, providerIDPrefix)
		if !ok || id == "" {
			return nil, errors.New("queryapi: provider ID " + strconv.Quote(node.ProviderID) + " is not this cloud's")
		}
		if raw, err = p.instances.ByID(ctx, id, 10*time.Second); err != nil {
			// Not listed, or no listing: the cloud's answer for this ID.
			list, _, err := p.describe(ctx, "reading instance "+id, true, rest.Param{Name: "InstanceId.1", Value: id})
			if errors.Is(err, sdk.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			if len(list) != 1 || list[0].ID != id {
				return nil, errors.New("queryapi: DescribeInstances of " + id + " answered another instance")
			}
			return &list[0], nil
		}
	}
	if err != nil {
		return nil, err
	}
	var in instance
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func (p *provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.find(ctx, node)
	return in != nil, err
}

func (p *provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.find(ctx, node)
	if err != nil {
		return false, err
	}
	if in == nil {
		return false, sdk.NotFound("queryapi: instance of " + node.Name + " is gone")
	}
	return in.State == "stopped", nil
}

func (p *provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	in, err := p.find(ctx, node)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, sdk.NotFound("queryapi: instance of " + node.Name + " is gone")
	}
	return &abi.InstanceMetadata{ProviderID: providerIDPrefix + in.ID, InstanceType: in.Type, Zone: in.Zone, Region: "region-1"}, nil
}

func init() {
	p := &provider{host: sdk.Imports()}
	sdk.Set(p)
	instancesv2.Set(p)
}

func main() {}
