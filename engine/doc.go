// Package engine is a continuous-batching scheduler over one llama.Model:
// many requests, from many goroutines, share one llama.Context whose
// sequences are slots, and every decode carries the next token of each
// generating slot together with the prompts being read. It is what the
// server package serves over HTTP, usable on its own without HTTP or JSON.
//
// An Engine keeps, as llama.cpp's llama-server does:
//
//   - slots (Options.Parallel), each a sequence of the context, picked by
//     the longest common prefix with the slot's cached tokens (prompt
//     cache), with --cache-reuse's shifting of cached chunks and a host-RAM
//     prompt cache for conversations whose slot was taken;
//   - a bounded queue (Options.QueueSize; ErrQueueFull past it);
//   - context shift for slots whose context is full (Options.ContextShift);
//   - a window-sized cache for sliding-window layers (unless
//     Context.SWAFull), with context checkpoints so that a prompt sharing
//     a prefix with what its slot holds goes back into the window
//     (Options.ContextCheckpoints; see checkpoint.go);
//   - per-request sampling (sampling.Params, grammars, lazy grammars,
//     logit bias, top-n probabilities), stop strings, limits and LoRA
//     scales (requests of other scales wait for a batch of their own); a
//     seeded request repeats its draws, but its text may change with the
//     requests batched beside it (see llama.Dist);
//   - embeddings and reranking (Options.Embedding, Options.Reranking);
//   - speculative decoding per slot (Options.Speculative);
//   - slot files (SaveSlot, RestoreSlot, EraseSlot) and Metrics, with
//     the loop's time by phase (StepTimes: idle, batch, the decode's
//     submit and wait, sampling, emitting, ...).
//
// A request runs with Generate, an iterator over its events:
//
//	eng, err := engine.New(model, engine.Options{Parallel: 4})
//	...
//	defer eng.Close()
//	req := engine.NewRequest(toks) // llama-server's defaults
//	req.NPredict = 64
//	for ev, err := range eng.Generate(ctx, req) {
//		if err != nil { ... }
//		fmt.Print(ev.Text)
//	}
//
// or with Submit, whose Stream reads like sql.Rows; SubmitAll reads several
// requests (the choices of one prompt, say) as one Stream, in the order
// their events come. Cancelling the context, breaking out of the loop or
// closing the Stream stops the request and frees its slot at once. The engine holds no goroutine per request, and events a
// slow reader has not taken yet wait in a queue of their own, so a slow
// reader never stalls the other slots.
//
// A panic on the engine's loop ends requests, never the process. Code that
// works for one slot (a request's start, its sampling with its Go samplers
// (Request.Samplers), its drafters (SpeculativeOptions.NewDrafters among
// them), a draft's check) recovers its own panic: that request ends with
// a *llama.PanicError and its slot is reset (memory, draft sequence,
// samplers), the others go on. A panic in the work the slots share (the
// batch, its decode) cannot be laid at one slot's door: every running
// request ends with it, and the engine serves on. Either way the stack
// goes to Options.Logger. The cost is a deferred recover per step and per
// slot's sampling, with no allocation.
//
// An Engine is safe for concurrent use. It owns its llama.Context (and a
// draft model's, with speculative decoding), freed by Close; the caller
// keeps the Model and closes it after the Engine.
package engine
