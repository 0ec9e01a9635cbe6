package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/modules/aws"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
)

const (
	awsModule   = "../../modules/aws/module"
	awsEndpoint = "http://ec2.bench"
)

var awsConfig = []byte(`{"region": "us-east-1", "clusterID": "bench", "ec2Endpoint": "` + awsEndpoint + `"}`)

// awsCredentials binds the fake's key pair, written into the env's
// credential directory, to the endpoint: the host signs every request with
// SigV4, natively and for the modules alike.
func (e *cloudEnv) awsCredentials(b testing.TB) credentials.Config {
	b.Helper()
	for name, value := range map[string]string{"aws-id": awsfake.DefaultAccessKeyID, "aws-secret": awsfake.DefaultSecretAccessKey} {
		if err := os.WriteFile(filepath.Join(e.credDir, name), []byte(value), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return credentials.Config{Dir: e.credDir, Auth: []credentials.AuthConfig{{Name: "aws", Origins: []string{awsEndpoint},
		SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "aws-id", SecretAccessKeyKey: "aws-secret"}}}}
}

// BenchmarkAWSInstanceMetadata is BenchmarkCall's InstanceMetadata for the
// Amazon EC2 provider: a Node without provider ID, found by its private DNS
// name among cloudInstances instances of the fake EC2 API (one
// DescribeInstances with two filters, signed with SigV4, answered in XML),
// natively and as Go and TinyGo modules. The module keeps no snapshot, so
// every call asks the API and decodes its XML: the ratio to native is the
// ABI, the guest's code and the XML decoding in wasm.
func BenchmarkAWSInstanceMetadata(b *testing.B) {
	ctx := context.Background()
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			e := newCloudEnvN(b, simcloud.Global{}, 0) // for its credential directory
			fake := awsfake.New(awsfake.Options{})
			var target awsfake.Instance
			for i := 1; i <= cloudInstances; i++ {
				in, err := fake.AddInstance(awsfake.Instance{Tags: map[string]string{"kubernetes.io/cluster/bench": "owned"}})
				if err != nil {
					b.Fatal(err)
				}
				if i == 42 {
					target = in
				}
			}
			e.transport = handlerTransport{fake.Handler()}
			creds := e.awsCredentials(b)
			n := &abi.Node{Name: target.PrivateDNSName}
			var call func() error
			if v.tc == "" {
				auth, err := credentials.NewTransport("native", creds, e.transport)
				if err != nil {
					b.Fatal(err)
				}
				p := aws.New(&native.Host{Transport: auth})
				if err := p.Init(ctx, clusterName, awsConfig); err != nil {
					b.Fatal(err)
				}
				call = func() error {
					meta, err := p.InstanceMetadata(ctx, n)
					if err != nil {
						return err
					}
					return checkMetadata(meta)
				}
			} else {
				cfg := e.cachedConfig("aws-" + string(v.tc))
				cfg.ProviderConfig = awsConfig
				cfg.HTTP = egress.Config{AllowedOrigins: []string{awsEndpoint}, Transport: e.transport}
				cfg.Credentials = creds
				m, err := host.New(ctx, moduleWasm(b, awsModule, v.tc), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close(context.Background()) })
				call = func() error { return wasmTarget{m}.instanceMetadata(ctx, n) }
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			measure(b, call)
		})
	}
}
