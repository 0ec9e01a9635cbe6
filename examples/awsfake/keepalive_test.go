package awsfake_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wasmccm/wasmccm/examples/awsfake"
)

// TestKeepAlive: a thousand signed requests from one plain client, on
// kept-alive connections, all answered in full (see bufferedBodies for why
// the SDK tests copy request bodies).
func TestKeepAlive(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	for i := 0; i < 3; i++ {
		cl.cloud.AddInstance(awsfake.Instance{Tags: map[string]string{"Name": "x"}})
	}
	creds := aws.Credentials{AccessKeyID: awsfake.DefaultAccessKeyID, SecretAccessKey: awsfake.DefaultSecretAccessKey}
	client := &http.Client{Transport: &http.Transport{}}
	reused := 0
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused++
		}
	}}
	for i := 0; i < 1000; i++ {
		body := "Action=DescribeInstances&Version=2016-11-15"
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", cl.srv.URL+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		h := sha256.Sum256([]byte(body))
		v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(h[:]), "ec2", "us-east-1", time.Now())
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(i, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(i, resp.StatusCode, err)
		}
	}
	if reused < 990 {
		t.Fatalf("%d of 1000 requests reused a connection", reused)
	}
}
