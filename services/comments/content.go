package comments

import (
	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/services/comments/richtext"
)

// checkContent checks a comment's text and sanitises its HTML, so that what is stored never
// holds active content, whatever was sent (docs/comments.md, "Content safety").
func checkContent(field, text, html string) (string, string, error) {
	if err := richtext.CheckText(text); err != nil {
		return "", "", apierr.InvalidArgument("%s.commentText %v", field, err)
	}
	if html == "" {
		return text, "", nil
	}
	clean, err := richtext.Sanitize(html)
	if err != nil {
		return "", "", apierr.InvalidArgument("%s.commentHtml %v", field, err)
	}
	return text, clean, nil
}
