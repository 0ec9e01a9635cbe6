module github.com/wasmccm/wasmccm/modules/sdk

go 1.24

require github.com/wasmccm/wasmccm/abi v0.1.0

// Development against the checkout; a release tags abi/vX.Y.Z first and the
// SDK requires that tag (replace directives of a dependency are ignored).
replace github.com/wasmccm/wasmccm/abi => ../../abi
