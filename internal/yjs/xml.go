package yjs

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// xmlNode is a parsed XML node: an element (name, attributes in document order, children) or
// a text node.
type xmlNode struct {
	name     string
	attrs    [][2]string
	children []xmlNode
	text     string
	isText   bool
}

// maxXMLDepth bounds the nesting of XML given to Replace.
const maxXMLDepth = 128

// parseXML reads an XML fragment: any number of elements and text nodes at the top, at most
// maxNodes of them in all (zero: any number). Names are kept as written (a prefix stays a
// prefix: yjs knows no namespaces), end tags must match their start tags, and nothing may close
// the fragment early.
func parseXML(s string, maxNodes int) ([]xmlNode, error) {
	nodes := 0
	count := func() error {
		if nodes++; maxNodes > 0 && nodes > maxNodes {
			return fmt.Errorf("%w: XML of more than %d nodes", ErrMemoryTooLarge, maxNodes)
		}
		return nil
	}
	dec := xml.NewDecoder(strings.NewReader("<r>" + s + "</r>"))
	dec.Strict = true
	root := &xmlNode{}
	var stack []*xmlNode
	closed := false
	bad := func(msg string) error {
		return fmt.Errorf("%w: Data is not well-formed XML: %s", ErrValue, msg)
	}
	for {
		tok, err := dec.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bad(xmlMessage(err))
		}
		if closed {
			return nil, bad("content after the end of the fragment")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 {
				stack = append(stack, root)
				continue
			}
			if len(stack) > maxXMLDepth {
				return nil, fmt.Errorf("%w: XML nested deeper than %d levels", ErrValue, maxXMLDepth)
			}
			if err := count(); err != nil {
				return nil, err
			}
			n := xmlNode{name: qname(t.Name)}
			for _, a := range t.Attr {
				n.attrs = append(n.attrs, [2]string{qname(a.Name), a.Value})
			}
			parent := stack[len(stack)-1]
			parent.children = append(parent.children, n)
			stack = append(stack, &parent.children[len(parent.children)-1])
		case xml.EndElement:
			if len(stack) == 0 {
				return nil, bad("unexpected end element")
			}
			if len(stack) == 1 {
				if qname(t.Name) != "r" {
					return nil, bad("element <" + qname(t.Name) + "> closed without being opened")
				}
				closed = true
			} else if cur := stack[len(stack)-1]; cur.name != qname(t.Name) {
				return nil, bad("element <" + cur.name + "> closed by </" + qname(t.Name) + ">")
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			parent := stack[len(stack)-1]
			if k := len(parent.children); k > 0 && parent.children[k-1].isText {
				parent.children[k-1].text += string(t)
			} else if len(t) > 0 {
				if err := count(); err != nil {
					return nil, err
				}
				parent.children = append(parent.children, xmlNode{isText: true, text: string(t)})
			}
		}
	}
	if !closed {
		return nil, bad("unexpected end")
	}
	return root.children, nil
}

func qname(n xml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
}

// xmlMessage keeps the parser's reason without its offsets into our wrapper element.
func xmlMessage(err error) string {
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return se.Msg
	}
	return "unexpected end"
}

// render is how yjs would print the node once written (toString), to compare nodes.
func (n xmlNode) render() string {
	if n.isText {
		return n.text
	}
	var sb strings.Builder
	name := strings.ToLower(n.name)
	sb.WriteString("<" + name)
	attrs := map[string]string{}
	for _, a := range n.attrs {
		attrs[a[0]] = a[1]
	}
	for _, k := range sortedStrings(attrs) {
		sb.WriteString(" " + k + `="` + attrs[k] + `"`)
	}
	sb.WriteString(">")
	for _, c := range n.children {
		sb.WriteString(c.render())
	}
	sb.WriteString("</" + name + ">")
	return sb.String()
}

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// replaceXML makes an XML fragment or element hold nodes: children diffed by their rendering;
// within a changed run, an element of the same name is edited in place (attributes key by
// key, children recursively) and a text node's text is diffed, others are replaced.
func (d *Doc) replaceXML(t *ytype, nodes []xmlNode, depth int) {
	type child struct {
		b   *block
		str string
	}
	var cur []child
	for b := t.start; b != nil; b = b.right {
		if b.visible() {
			s := ""
			if b.content.ref == refType {
				s = xmlString(b.content.typ(), b.content.typ().ref, 0)
			}
			cur = append(cur, child{b, s})
		}
	}
	a := make([]string, len(cur))
	for i, c := range cur {
		a[i] = c.str
	}
	bs := make([]string, len(nodes))
	for i, n := range nodes {
		bs[i] = n.render()
	}
	edits := diffSeq(a, bs)
	// Apply from the end so earlier positions stay valid; each edit works on items directly.
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		paired := min(e.del, e.ins)
		var left *block
		if e.at > 0 {
			left = cur[e.at-1].b
		}
		for j := 0; j < e.del; j++ {
			old := cur[e.at+j].b
			if j < paired && depth < maxXMLDepth && d.editInPlace(old, nodes[e.insAt+j], depth) {
				left = old
				continue
			}
			d.deleteItem(old)
			if j < paired {
				left = d.insertXML(t, left, nodes[e.insAt+j], depth)
			} else {
				left = old
			}
		}
		for j := paired; j < e.ins; j++ {
			left = d.insertXML(t, left, nodes[e.insAt+j], depth)
		}
	}
}

// editInPlace edits an existing element or text node to match n when their kinds agree.
func (d *Doc) editInPlace(b *block, n xmlNode, depth int) bool {
	if b.content.ref != refType {
		return false
	}
	t := b.content.typ()
	switch {
	case n.isText && t.ref == typeXMLText && plainText(t):
		d.replaceText(t, n.text)
		return true
	case !n.isText && t.ref == typeXMLElement && t.name == n.name:
		want := map[string]any{}
		for _, a := range n.attrs {
			want[a[0]] = a[1]
		}
		d.replaceMap(t, want, maxViewDepth)
		d.replaceXML(t, n.children, depth+1)
		return true
	}
	return false
}

// plainText reports whether a text holds nothing but strings: formats and embeds print as
// tags, which a text node of the new XML does not have, so such a text is replaced instead.
func plainText(t *ytype) bool {
	for b := t.start; b != nil; b = b.right {
		if !b.deleted && b.content.ref != refString {
			return false
		}
	}
	return true
}

// insertXML inserts a node after left in t and returns its item.
func (d *Doc) insertXML(t *ytype, left *block, n xmlNode, depth int) *block {
	if d.replaceFull() {
		return left
	}
	var right *block
	if left != nil {
		right = left.right
	} else {
		right = t.start
	}
	if n.isText {
		nt := &ytype{ref: typeXMLText}
		b := d.newItem(t, left, right, "", false, content{ref: refType, x: &contentX{typ: nt}})
		if n.text != "" {
			d.newItem(nt, nil, nil, "", false, textContent(unitsOf(n.text)))
		}
		return b
	}
	nt := &ytype{ref: typeXMLElement, name: n.name}
	b := d.newItem(t, left, right, "", false, content{ref: refType, x: &contentX{typ: nt}})
	for _, a := range n.attrs {
		d.newItem(nt, nt.m[a[0]], nil, a[0], true, anyContent([]any{a[1]}))
	}
	var l *block
	for _, c := range n.children {
		l = d.insertXML(nt, l, c, depth+1)
	}
	return b
}
