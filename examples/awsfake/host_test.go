package awsfake_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

// TestHostSigner sends requests as a module does, naming a sigv4
// credential and the service and region per request, through the host's
// own signing transport: the fake accepts what the host signs, for both
// services, and refuses it when the Secret holds a wrong key.
func TestHostSigner(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	if _, err := cl.cloud.AddInstance(awsfake.Instance{}); err != nil {
		t.Fatal(err)
	}
	transport := func(secret string) http.RoundTripper {
		dir := t.TempDir()
		for k, v := range map[string]string{"id": awsfake.DefaultAccessKeyID + "\n", "secret": secret} {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		rt, err := credentials.NewTransport("aws", credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{{Name: "aws",
			Origins: []string{cl.srv.URL}, SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"}}}},
			http.DefaultTransport)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	send := func(rt http.RoundTripper, service, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", cl.srv.URL+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		req.Header.Set(abi.HeaderCredential, "aws")
		req.Header.Set(abi.HeaderSigV4Service, service)
		req.Header.Set(abi.HeaderSigV4Region, awsfake.DefaultRegion)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := transport(awsfake.DefaultSecretAccessKey)
	if status, body := send(good, "ec2", "Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=instance-state-name&Filter.1.Value.1=running"); status != 200 ||
		!strings.Contains(body, "<instanceId>i-") || !strings.Contains(body, `xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"`) {
		t.Fatalf("host-signed DescribeInstances: %d %s", status, body)
	}
	if status, body := send(good, "elasticloadbalancing", "Action=DescribeLoadBalancers&Version=2012-06-01"); status != 200 ||
		!strings.Contains(body, "<DescribeLoadBalancersResult>") {
		t.Fatalf("host-signed DescribeLoadBalancers: %d %s", status, body)
	}
	if status, body := send(good, "ec2", "Action=DescribeLoadBalancers&Version=2012-06-01"); status != 403 || !strings.Contains(body, "<Code>SignatureDoesNotMatch</Code>") {
		t.Fatalf("ELB request signed for ec2: %d %s", status, body)
	}
	if status, body := send(transport("not-the-secret"), "ec2", "Action=DescribeInstances&Version=2016-11-15"); status != 401 ||
		!strings.Contains(body, "<Code>AuthFailure</Code>") || !strings.Contains(body, "<Response><Errors><Error>") {
		t.Fatalf("wrong secret: %d %s", status, body)
	}
}

// TestSignedGET: the Query protocol's GET form, parameters in the query
// string, signed by aws-sdk-go-v2's signer: the canonical query string is
// checked too.
func TestSignedGET(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	creds := aws.Credentials{AccessKeyID: awsfake.DefaultAccessKeyID, SecretAccessKey: awsfake.DefaultSecretAccessKey}
	get := func(query string, tamper bool) int {
		req, _ := http.NewRequest("GET", cl.srv.URL+"/?"+query, nil)
		empty := sha256.Sum256(nil)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(empty[:]), "ec2", awsfake.DefaultRegion, time.Now()); err != nil {
			t.Fatal(err)
		}
		if tamper {
			req.URL.RawQuery += "&DryRun=true"
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	q := "Action=DescribeAvailabilityZones&Version=2016-11-15&Filter.1.Name=zone-name&Filter.1.Value.1=us-east-1%2A"
	if got := get(q, false); got != 200 {
		t.Fatalf("signed GET: %d", got)
	}
	if got := get(q, true); got != 401 {
		t.Fatalf("GET with a parameter added after signing: %d, want 401", got)
	}
}
