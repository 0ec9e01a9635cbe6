package xmltree

import (
	"bytes"
	"encoding/xml"
	"io"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	valid := map[string]*Element{
		`<?xml version="1.0" encoding="UTF-8"?><A xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><b>x &amp; y &#65;&#x42;</b><c/><d a="1>2"> t </d></A>`: {Name: "A", Children: []*Element{
			{Name: "b", Text: "x & y AB"}, {Name: "c"}, {Name: "d", Text: " t "}}},
		"<a><!-- c --><![CDATA[<raw>]]>\r\n<ns:b>1</ns:b></a>\n": {Name: "a", Text: "<raw>\n", Children: []*Element{{Name: "b", Text: "1"}}},
	}
	for doc, want := range valid {
		got, err := Parse([]byte(doc))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v, %v", doc, got, err)
		}
	}
	for _, doc := range []string{"", "text", "<a>", "<a></b>", "<a/><b/>", "<a>&nope;</a>", "<a>&#xZZ;</a>", "<!DOCTYPE a><a/>",
		"<a><b></a></b>", "<a x='>", "<>", "<a>1</a>trailing", "<a><![CDATA[x</a>", "<?xml"} {
		if got, err := Parse([]byte(doc)); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", doc, got)
		}
	}
}

// FuzzParse: the parser never panics, and whenever both it and
// encoding/xml accept a document they read the same elements and text.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`<DescribeInstancesResponse xmlns="x"><reservationSet><item><instancesSet><item><instanceId>i-1</instanceId></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`,
		`<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID 'i-1' does not exist</Message></Error></Errors><RequestID>r</RequestID></Response>`,
		"<a>x&lt;y<b/>z<![CDATA[&]]></a>",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := Parse(doc)
		if err != nil {
			return
		}
		want, ok := stdTree(doc)
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %s\nencoding/xml: %s", doc, dump(got), dump(want))
		}
	})
}

// stdTree reads doc with encoding/xml into the same shape.
func stdTree(doc []byte) (*Element, bool) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root *Element
	var open []*Element
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
			el := &Element{Name: tok.Name.Local}
			if len(open) > 0 {
				open[len(open)-1].Children = append(open[len(open)-1].Children, el)
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
				open[len(open)-1].Text += string(tok)
			}
		case xml.Directive:
			return nil, false
		}
	}
}

func dump(e *Element) string {
	s := "<" + e.Name + " " + e.Text
	for _, c := range e.Children {
		s += dump(c)
	}
	return s + ">"
}
