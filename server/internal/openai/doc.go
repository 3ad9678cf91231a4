// Package openai is the server's dialect of OpenAI's chat completions
// (POST /v1/chat/completions) and text completions (POST /v1/completions):
// their wire types, the translation of a chat body into the internal
// wire.Chat (ToChat) and the answer and stream shapes (ChatCompletion,
// Completion, their choices, usage and logprobs). The server's handlers
// decode a body, run it and write what this package builds; the bodies
// embed llama.cpp's own fields (wire.Gen), and the Responses dialect reads
// its chat completion fields with ChatBody. Errors of translation are
// *wire.Error (a 400).
package openai
