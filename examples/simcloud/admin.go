package simcloud

import (
	"fmt"
	"net/http"
)

// State is the body of GET /admin/state: everything at once, for demos and
// debugging.
type State struct {
	Instances     []Instance     `json:"instances"`
	LoadBalancers []LoadBalancer `json:"loadBalancers"`
	Routes        []Route        `json:"routes"`
	Zones         []Zone         `json:"zones"`
	Faults        []Fault        `json:"faults"`
	Global        Global         `json:"global"`
}

// State returns a snapshot of all resources and fault settings.
func (c *Cloud) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return State{
		Instances:     c.instancesLocked("", ""),
		LoadBalancers: c.loadBalancersLocked(),
		Routes:        c.routesLocked(),
		Zones:         c.zonesLocked(),
		Faults:        c.Faults(),
		Global:        c.global,
	}
}

func (c *Cloud) adminState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.State())
}

func (c *Cloud) adminListInstances(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Instances())
}

func (c *Cloud) adminAddInstance(w http.ResponseWriter, r *http.Request) {
	var in Instance
	if err := decodeBody(w, r, &in); err != nil {
		writeErr(w, err)
		return
	}
	out, err := c.AddInstance(in)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (c *Cloud) adminUpdateInstance(w http.ResponseWriter, r *http.Request) {
	var in Instance
	if err := decodeBody(w, r, &in); err != nil {
		writeErr(w, err)
		return
	}
	id := r.PathValue("id")
	if in.ID != "" && in.ID != id {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("id %q does not match %q", in.ID, id))
		return
	}
	in.ID = id
	out, err := c.UpdateInstance(in)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Cloud) adminDeleteInstance(w http.ResponseWriter, r *http.Request) {
	if err := c.DeleteInstance(r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) adminSetState(state string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, err := c.setInstanceState(r.PathValue("id"), state)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, in)
	}
}

func (c *Cloud) adminListFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Faults())
}

func (c *Cloud) adminSetFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if err := decodeBody(w, r, &f); err != nil {
		writeErr(w, err)
		return
	}
	f, err := c.SetFault(f)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (c *Cloud) adminClearFaults(w http.ResponseWriter, r *http.Request) {
	c.ClearFaults()
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) adminClearFault(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !c.ClearFault(name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("fault %q not found", name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) adminGetGlobal(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Global())
}

func (c *Cloud) adminSetGlobal(w http.ResponseWriter, r *http.Request) {
	var g Global
	if err := decodeBody(w, r, &g); err != nil {
		writeErr(w, err)
		return
	}
	g, err := c.SetGlobal(g)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (c *Cloud) adminGetCounters(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Counters())
}

func (c *Cloud) adminResetCounters(w http.ResponseWriter, r *http.Request) {
	c.ResetCounters()
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) adminReset(w http.ResponseWriter, r *http.Request) {
	c.Reset()
	w.WriteHeader(http.StatusNoContent)
}
