package smtptest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Mail is a received message decoded the way a mail client reads it.
type Mail struct {
	Header mail.Header // the top-level header fields, undecoded
	// From, To and Subject are those header fields, RFC 2047 encoded words decoded.
	From, To, Subject string
	MessageID         string
	// Text and HTML are the first text/plain and text/html parts, decoded, with line breaks
	// as "\n" (text is sent with CRLF, RFC 2046's canonical form); empty when absent.
	Text, HTML string
	// ContentType is the top-level media type, such as "multipart/alternative".
	ContentType string
	// Parts are the leaf parts in message order: one for a single-part message.
	Parts []Part
}

// Part is one leaf body part, decoded.
type Part struct {
	ContentType      string // media type, lower case: "text/plain"
	Charset          string // lower case; "us-ascii" when the part names none
	TransferEncoding string // Content-Transfer-Encoding, lower case; "" when absent
	Body             string // decoded; text line breaks as "\n"
}

// Parse decodes a message as received (Received.Data): its header fields, and every leaf part
// of a single-part or (nested) multipart body, undoing quoted-printable and base64. It refuses
// what it cannot decode faithfully: a charset other than UTF-8 or US-ASCII, an unknown
// transfer encoding, a malformed multipart.
func Parse(raw []byte) (Mail, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Mail{}, fmt.Errorf("parse message: %w", err)
	}
	var dec mime.WordDecoder
	m := Mail{Header: msg.Header, MessageID: msg.Header.Get("Message-ID")}
	for _, f := range []struct {
		name string
		into *string
	}{{"From", &m.From}, {"To", &m.To}, {"Subject", &m.Subject}} {
		if *f.into, err = dec.DecodeHeader(msg.Header.Get(f.name)); err != nil {
			return Mail{}, fmt.Errorf("parse message: %s: %w", f.name, err)
		}
	}
	m.ContentType, m.Parts, err = parts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
		return Mail{}, fmt.Errorf("parse message: %w", err)
	}
	for _, p := range m.Parts {
		switch {
		case p.ContentType == "text/plain" && m.Text == "":
			m.Text = p.Body
		case p.ContentType == "text/html" && m.HTML == "":
			m.HTML = p.Body
		}
	}
	return m, nil
}

// parts decodes a body of the given Content-Type and Content-Transfer-Encoding into its leaf
// parts, returning its media type.
func parts(contentType, encoding string, body io.Reader) (string, []Part, error) {
	mediaType, params := "text/plain", map[string]string{"charset": "us-ascii"} // RFC 2045's default
	if contentType != "" {
		var err error
		if mediaType, params, err = mime.ParseMediaType(contentType); err != nil {
			return "", nil, fmt.Errorf("content type %q: %w", contentType, err)
		}
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		if params["boundary"] == "" {
			return "", nil, fmt.Errorf("%s without a boundary", mediaType)
		}
		var out []Part
		r := multipart.NewReader(body, params["boundary"])
		for {
			// Raw: NextPart would decode quoted-printable itself and drop the header saying so.
			p, err := r.NextRawPart()
			if errors.Is(err, io.EOF) {
				return mediaType, out, nil
			}
			if err != nil {
				return "", nil, fmt.Errorf("%s: %w", mediaType, err)
			}
			_, sub, err := parts(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p)
			if err != nil {
				return "", nil, fmt.Errorf("%s part %d: %w", mediaType, len(out)+1, err)
			}
			out = append(out, sub...)
		}
	}
	part := Part{ContentType: mediaType, Charset: strings.ToLower(params["charset"]), TransferEncoding: strings.ToLower(encoding)}
	if part.Charset == "" {
		part.Charset = "us-ascii"
	}
	var r io.Reader
	switch part.TransferEncoding {
	case "", "7bit", "8bit", "binary":
		r = body
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body) // skips the line breaks
	default:
		return "", nil, fmt.Errorf("%s: unknown transfer encoding %q", mediaType, encoding)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %s body: %w", mediaType, part.TransferEncoding, err)
	}
	part.Body = string(b)
	if strings.HasPrefix(mediaType, "text/") {
		if part.Charset != "utf-8" && part.Charset != "us-ascii" {
			return "", nil, fmt.Errorf("%s: charset %q not supported", mediaType, part.Charset)
		}
		part.Body = strings.ReplaceAll(part.Body, "\r\n", "\n")
	}
	return mediaType, []Part{part}, nil
}
