package aws

import (
	"bytes"
	"encoding/xml"
	"io"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
)

// BenchmarkDecodeDescribeInstances reads the fake's DescribeInstances
// answer for one instance, natively: with xmltree.Parse and the provider's
// mapping, and, for comparison, with encoding/xml's tokenizer alone.
func BenchmarkDecodeDescribeInstances(b *testing.B) {
	e := newEnv(b, awsfake.DefaultSecretAccessKey)
	in := e.instances["running"]
	resp, err := e.p.host.HTTP(&abi.HTTPRequest{Method: "POST", URL: e.p.ec2.endpoint + "/",
		Body: []byte("Action=DescribeInstances&Version=2016-11-15&InstanceId.1=" + in.ID), Headers: []abi.Header{
			{Name: "Content-Type", Value: "application/x-www-form-urlencoded; charset=utf-8"},
			{Name: abi.HeaderCredential, Value: "aws"}, {Name: abi.HeaderSigV4Service, Value: "ec2"}, {Name: abi.HeaderSigV4Region, Value: "us-east-1"}}})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%+v, %v", resp, err)
	}
	b.Run("xmltree.Parse", func(b *testing.B) {
		for b.Loop() {
			root, err := xmltree.Parse(resp.Body)
			if err != nil {
				b.Fatal(err)
			}
			if got := instanceOf(root.Items("reservationSet")[0].Items("instancesSet")[0]); got.ID != in.ID {
				b.Fatalf("read %+v", got)
			}
		}
	})
	b.Run("encoding-xml-tokens", func(b *testing.B) {
		for b.Loop() {
			d := xml.NewDecoder(bytes.NewReader(resp.Body))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
