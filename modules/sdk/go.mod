module github.com/wasmccm/wasmccm/modules/sdk

go 1.24
