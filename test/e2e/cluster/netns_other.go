//go:build !linux

package cluster

import "errors"

// netns is Linux's only.
type netns struct{}

const netnsDir = ""

func newNetns(string, string) (*netns, error) {
	return nil, errors.New("network namespaces need Linux")
}

func (n *netns) wrap(binary string, args []string) (string, []string) { return binary, args }

func (n *netns) forward(string) error { return nil }

func (n *netns) remove() error { return nil }
