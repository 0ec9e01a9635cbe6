package aws

import (
	"bytes"
	"encoding/xml"
	"io"
	"reflect"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
)

func TestParseXML(t *testing.T) {
	valid := map[string]*element{
		`<?xml version="1.0" encoding="UTF-8"?><A xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><b>x &amp; y &#65;&#x42;</b><c/><d a="1>2"> t </d></A>`: {name: "A", children: []*element{
			{name: "b", text: "x & y AB"}, {name: "c"}, {name: "d", text: " t "}}},
		"<a><!-- c --><![CDATA[<raw>]]>\r\n<ns:b>1</ns:b></a>\n": {name: "a", text: "<raw>\n", children: []*element{{name: "b", text: "1"}}},
	}
	for doc, want := range valid {
		got, err := parseXML([]byte(doc))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseXML(%q) = %+v, %v", doc, got, err)
		}
	}
	for _, doc := range []string{"", "text", "<a>", "<a></b>", "<a/><b/>", "<a>&nope;</a>", "<a>&#xZZ;</a>", "<!DOCTYPE a><a/>",
		"<a><b></a></b>", "<a x='>", "<>", "<a>1</a>trailing", "<a><![CDATA[x</a>", "<?xml"} {
		if got, err := parseXML([]byte(doc)); err == nil {
			t.Errorf("parseXML(%q) = %+v, want an error", doc, got)
		}
	}
}

// FuzzParseXML: the parser never panics, and whenever both it and
// encoding/xml accept a document they read the same elements and text.
func FuzzParseXML(f *testing.F) {
	for _, seed := range []string{
		`<DescribeInstancesResponse xmlns="x"><reservationSet><item><instancesSet><item><instanceId>i-1</instanceId></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`,
		`<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID 'i-1' does not exist</Message></Error></Errors><RequestID>r</RequestID></Response>`,
		"<a>x&lt;y<b/>z<![CDATA[&]]></a>",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := parseXML(doc)
		if err != nil {
			return
		}
		want, ok := stdTree(doc)
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("parseXML(%q) = %s\nencoding/xml: %s", doc, dump(got), dump(want))
		}
	})
}

// stdTree reads doc with encoding/xml into the same shape.
func stdTree(doc []byte) (*element, bool) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root *element
	var open []*element
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return root, root != nil && len(open) == 0
		}
		if err != nil {
			return nil, false
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			el := &element{name: tok.Name.Local}
			if len(open) > 0 {
				open[len(open)-1].children = append(open[len(open)-1].children, el)
			} else if root == nil {
				root = el
			} else {
				return nil, false
			}
			open = append(open, el)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				open[len(open)-1].text += string(tok)
			}
		case xml.Directive:
			return nil, false
		}
	}
}

func dump(e *element) string {
	s := "<" + e.name + " " + e.text
	for _, c := range e.children {
		s += dump(c)
	}
	return s + ">"
}

// BenchmarkDecodeDescribeInstances reads the fake's DescribeInstances
// answer for one instance, natively: with parseXML and the provider's
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
	b.Run("parseXML", func(b *testing.B) {
		for b.Loop() {
			root, err := parseXML(resp.Body)
			if err != nil {
				b.Fatal(err)
			}
			if got := instanceOf(root.items("reservationSet")[0].items("instancesSet")[0]); got.ID != in.ID {
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
