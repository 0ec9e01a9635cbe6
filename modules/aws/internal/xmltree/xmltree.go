// Package xmltree reads the XML answers of AWS's Query APIs into a tree.
//
// The EC2 Query API answers in XML. encoding/xml decodes an answer of one
// instance in about 340 µs inside a TinyGo module, half of the whole call
// (BENCHMARKS.md), and most of that is its general tokenizer. The answers
// need far less: elements, their character data, and nothing else. So the
// provider reads them with this small parser into a tree, and picks the
// fields it uses by name. What AWS does not send (a DOCTYPE, entities
// other than the XML ones) is an error, never a guess. It is a package of
// its own so that its fuzz test builds only what it reads with.
package xmltree

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Element is one XML element: its local name (without namespace prefix),
// its character data with references decoded, and its child elements.
// Attributes are not kept: the answers carry none the provider reads.
type Element struct {
	Name     string
	Text     string
	Children []*Element
}

// Parse reads a document into its root element.
func Parse(data []byte) (*Element, error) {
	var root *Element
	var open []*Element
	for i := 0; i < len(data); {
		rest := data[i:]
		if rest[0] != '<' {
			n := bytes.IndexByte(rest, '<')
			if n < 0 {
				n = len(rest)
			}
			if len(open) > 0 {
				text, err := unescape(rest[:n])
				if err != nil {
					return nil, err
				}
				open[len(open)-1].Text += text
			} else if len(bytes.TrimSpace(rest[:n])) > 0 {
				return nil, errors.New("xml: character data outside the root element")
			}
			i += n
			continue
		}
		var end int
		switch {
		case bytes.HasPrefix(rest, []byte("<?")):
			end = after(rest, "?>")
		case bytes.HasPrefix(rest, []byte("<!--")):
			end = after(rest, "-->")
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			if end = after(rest, "]]>"); end > 0 && len(open) > 0 {
				cdata := bytes.ReplaceAll(bytes.ReplaceAll(rest[9:end-3], []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
				open[len(open)-1].Text += string(cdata)
			}
		case bytes.HasPrefix(rest, []byte("<!")):
			return nil, errors.New("xml: declarations such as DOCTYPE are not accepted")
		case bytes.HasPrefix(rest, []byte("</")):
			end = bytes.IndexByte(rest, '>') + 1
			if end == 0 {
				break
			}
			name := localName(string(bytes.TrimSpace(rest[2 : end-1])))
			if len(open) == 0 || open[len(open)-1].Name != name {
				return nil, errors.New("xml: unexpected end element </" + name + ">")
			}
			open = open[:len(open)-1]
		default:
			end = tagEnd(rest) + 1
			if end == 0 {
				break
			}
			tag := rest[1 : end-1]
			selfClosing := len(tag) > 0 && tag[len(tag)-1] == '/'
			n := bytes.IndexAny(tag, " \t\r\n/")
			if n < 0 {
				n = len(tag)
			}
			if n == 0 {
				return nil, errors.New("xml: element without a name")
			}
			el := &Element{Name: localName(string(tag[:n]))}
			switch {
			case len(open) > 0:
				parent := open[len(open)-1]
				parent.Children = append(parent.Children, el)
			case root != nil:
				return nil, errors.New("xml: more than one root element")
			default:
				root = el
			}
			if !selfClosing {
				open = append(open, el)
			}
		}
		if end <= 0 {
			return nil, errors.New("xml: document ends inside markup")
		}
		i += end
	}
	if root == nil || len(open) > 0 {
		return nil, errors.New("xml: document ends before its root element does")
	}
	return root, nil
}

// after is the length of b up to and including the first marker, 0 when
// marker is absent.
func after(b []byte, marker string) int {
	if i := bytes.Index(b, []byte(marker)); i >= 0 {
		return i + len(marker)
	}
	return 0
}

// tagEnd finds the '>' closing a start tag, skipping quoted attribute
// values; -1 when there is none.
func tagEnd(b []byte) int {
	var quote byte
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return i
		}
	}
	return -1
}

// localName drops a namespace prefix: "ec2:item" is "item"; a name with
// an empty side (":", "a:") is kept whole, as encoding/xml reads it.
func localName(name string) string {
	if prefix, local, ok := strings.Cut(name, ":"); ok && prefix != "" && local != "" {
		return local
	}
	return name
}

// unescape decodes the five XML entities and character references, and
// normalizes line ends to "\n", as XML requires.
func unescape(b []byte) (string, error) {
	if bytes.IndexByte(b, '\r') >= 0 {
		b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	}
	if bytes.IndexByte(b, '&') < 0 {
		return string(b), nil
	}
	var out strings.Builder
	for len(b) > 0 {
		amp := bytes.IndexByte(b, '&')
		if amp < 0 {
			out.Write(b)
			break
		}
		out.Write(b[:amp])
		semi := bytes.IndexByte(b[amp:], ';')
		if semi < 0 {
			return "", errors.New("xml: unterminated reference")
		}
		ref := string(b[amp+1 : amp+semi])
		switch ref {
		case "amp":
			out.WriteByte('&')
		case "lt":
			out.WriteByte('<')
		case "gt":
			out.WriteByte('>')
		case "quot":
			out.WriteByte('"')
		case "apos":
			out.WriteByte('\'')
		default:
			r, err := charRef(ref)
			if err != nil {
				return "", err
			}
			out.WriteRune(r)
		}
		b = b[amp+semi+1:]
	}
	return out.String(), nil
}

func charRef(ref string) (rune, error) {
	var n uint64
	var err error
	switch {
	case strings.HasPrefix(ref, "#x"):
		n, err = strconv.ParseUint(ref[2:], 16, 32)
	case strings.HasPrefix(ref, "#"):
		n, err = strconv.ParseUint(ref[1:], 10, 32)
	default:
		return 0, errors.New("xml: unknown entity &" + ref + ";")
	}
	if err != nil || !utf8.ValidRune(rune(n)) {
		return 0, errors.New("xml: invalid character reference &" + ref + ";")
	}
	return rune(n), nil
}

// Child is the first child element named name; nil when there is none,
// or e is nil, so that paths can be followed without checks.
func (e *Element) Child(name string) *Element {
	if e == nil {
		return nil
	}
	for _, c := range e.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TextOf is the character data of the child named name, "" without one.
func (e *Element) TextOf(name string) string {
	if c := e.Child(name); c != nil {
		return c.Text
	}
	return ""
}

// Items are the entries of the list named name: <item> elements as EC2
// writes lists, <member> as ELB does.
func (e *Element) Items(name string) []*Element {
	list := e.Child(name)
	if list == nil {
		return nil
	}
	var out []*Element
	for _, c := range list.Children {
		if c.Name == "item" || c.Name == "member" {
			out = append(out, c)
		}
	}
	return out
}
