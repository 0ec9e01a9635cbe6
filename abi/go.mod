module github.com/wasmccm/wasmccm/abi

go 1.24
