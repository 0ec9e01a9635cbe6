// Package host runs wasmccm provider modules in wazero.
//
// A Module is one compiled provider: its exports were checked against ABI
// v1 (package abi) when it was created, and calls go to a bounded pool of
// instances, one call per instance at a time, so controller workers run in
// parallel without sharing guest state. Every call has a deadline enforced
// from outside the guest, every instance has a memory cap, and an instance
// that traps or times out is closed and replaced: a guest runtime that
// panicked is not trusted with another call.
//
// The sandbox is what the module is given and nothing more: WASI without
// files, environment or arguments; HTTP only to allowlisted destinations
// (package runtime/egress), authenticated by the host with the
// credentials bound to them (package runtime/credentials), whose secrets
// the module never holds; a shared state bounded in bytes (package
// runtime/sharedstate); and a rate-limited log.
//
// The host functions live here: they bound and read what the guest hands
// them, call those packages, and copy the result back.
package host
