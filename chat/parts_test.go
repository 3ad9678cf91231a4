package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextPartsJoined: a template that reads content as a string gets text
// parts joined, never a list printed Python-style.
func TestTextPartsJoined(t *testing.T) {
	tm, err := ParseTemplate(`{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}`)
	require.NoError(t, err)
	asString, err := tm.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Content: "Once upon\na time"}}})
	require.NoError(t, err)
	asParts, err := tm.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Parts: []ContentPart{
		{Type: "text", Text: "Once upon"}, {Type: "text", Text: "a time"}}}}})
	require.NoError(t, err)
	assert.Equal(t, asString, asParts)
	assert.Equal(t, "user: Once upon\na time\n", asParts)
}
