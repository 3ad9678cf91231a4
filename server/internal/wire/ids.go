package wire

import "crypto/rand"

// NewID returns prefix followed by 32 random letters and digits.
func NewID(prefix string) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return prefix + string(b)
}

// IDOrNew returns id, or a new random ID with prefix when id is empty (a
// tool call whose format carries no ID).
func IDOrNew(id, prefix string) string {
	if id != "" {
		return id
	}
	return NewID(prefix)
}
