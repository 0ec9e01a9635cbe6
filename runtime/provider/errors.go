package provider

import (
	"errors"
	"fmt"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// notFoundMeans says what a StatusNotFound answer becomes for one method.
type notFoundMeans int

const (
	// notFoundIsError: the controllers would misread InstanceNotFound here,
	// or the method has no "not found" meaning; it stays an error.
	notFoundIsError notFoundMeans = iota
	// notFoundIsInstanceNotFound: the controllers expect
	// cloudprovider.InstanceNotFound from this method.
	notFoundIsInstanceNotFound
)

// mapError turns a host call error into what k8s.io/cloud-provider's
// controllers expect. The invariant that protects Nodes: nothing but an
// explicit answer from the module becomes "not found", and a failed call
// (trap, timeout, host error) is always a plain error.
func mapError(err error, nf notFoundMeans) error {
	if err == nil {
		return nil
	}
	var status *host.StatusError
	if !errors.As(err, &status) {
		return err
	}
	switch status.Status {
	case abi.StatusNotFound:
		if nf == notFoundIsInstanceNotFound {
			return cloudprovider.InstanceNotFound
		}
	case abi.StatusNotImplemented:
		return cloudprovider.NotImplemented
	case abi.StatusImplementedElsewhere:
		return cloudprovider.ImplementedElsewhere
	case abi.StatusRetryAfter:
		return api.NewRetryError(status.Error(), status.RetryAfter)
	}
	return fmt.Errorf("module: %w", err)
}
