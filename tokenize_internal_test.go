package llama

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// TestTokenizeBudget: a model tokenizes at most maxTokenizing bytes of
// text at once. With the budget held but for 10 bytes, an 11-byte text
// waits for it and a 10-byte one does not.
func TestTokenizeBudget(t *testing.T) {
	m, err := LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.tokenizing.Acquire(context.Background(), maxTokenizing-10))
	_, err = m.Tokenize(strings.Repeat("a", 10), TokenizeOptions{})
	require.NoError(t, err, "fits beside what is held")
	done := make(chan error, 1)
	go func() {
		_, err := m.Tokenize(strings.Repeat("a", 11), TokenizeOptions{})
		done <- err
	}()
	select {
	case <-done:
		t.Fatal("an 11-byte text ran while only 10 bytes were free")
	case <-time.After(100 * time.Millisecond):
	}
	m.tokenizing.Release(maxTokenizing - 10)
	require.NoError(t, <-done)
	assert.True(t, m.tokenizing.TryAcquire(maxTokenizing), "all of it is given back")
}

// TestTokenizeBudgetNoDeadlock: a grammar's token names are resolved under
// the chain's hold on the model, without the tokenizing budget; and
// Tokenize takes the budget only under its own hold, so a Close waiting
// for the holds cannot stop a tokenization from ending.
func TestTokenizeBudgetNoDeadlock(t *testing.T) {
	m, err := LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), ModelOptions{})
	require.NoError(t, err)
	require.NoError(t, m.tokenizing.Acquire(context.Background(), maxTokenizing))
	g, err := ParseGrammar(context.Background(), `root ::= <s> "a"`, "root")
	require.NoError(t, err)
	built := make(chan error, 1)
	go func() {
		c, err := NewSamplerChain(m, SamplerChainOptions{}, g.Sampler(), Greedy())
		if c != nil {
			c.Close()
		}
		built <- err
	}()
	select {
	case err := <-built:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("building a chain with a token name waited for the tokenizing budget")
	}
	// A Tokenize waiting for the budget, then Close: once the budget is
	// given back, the Tokenize ends and so does Close.
	tokenized := make(chan error, 1)
	go func() {
		_, err := m.Tokenize("Once upon a time", TokenizeOptions{})
		tokenized <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	time.Sleep(50 * time.Millisecond)
	m.tokenizing.Release(maxTokenizing)
	for name, ch := range map[string]chan error{"tokenize": tokenized, "close": closed} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not end", name)
		}
	}
}
