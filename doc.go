// Package llama is an idiomatic Go API for llama.cpp: load a GGUF model,
// tokenize, decode batches, sample with any chain of llama.cpp's samplers
// (or your own in Go), constrain output with grammars or JSON Schema, and
// stream generations as iterators. It calls the prebuilt llama.cpp shared
// library through purego, so it builds with CGO_ENABLED=0.
//
// # Getting the library
//
// The first LoadModel finds the pinned llama.cpp build (release v0.4.0) in
// $LLAMA_LIB_DIR or the cache folder; a missing one is an error matching
// ErrLibrary that names the command installing it. Installing is explicit:
// go run github.com/x/llama/lib/cmd/llama-install, lib.Install, or
// Init(LibraryOptions{Install: true}) before the first LoadModel, which
// installs it into the cache folder through the npm client when missing.
// Init also chooses a folder or a GPU flavor. A library of another ABI is
// refused at load.
//
// # Models from Hugging Face
//
// Package hub's Pull("org/repo:quant", ...) downloads a model as
// llama.cpp's -hf does, into the Hugging Face hub cache it shares with
// llama.cpp and huggingface_hub ($LLAMA_CACHE, $HF_HUB_CACHE, $HF_HOME...;
// see hub.CacheDir), and returns the path to pass to LoadModel. The
// library's own cache is separate ($GO_LLAMA_LIB_CACHE).
//
// # Objects and lifetimes
//
// A Model owns the weights and vocabulary and is safe for concurrent use.
// From it come Contexts (KV memory, decoding; one goroutine at a time),
// SamplerChains (one goroutine at a time) and Adapters (LoRA). Each has an
// idempotent Close; closing the Model closes everything made from it, and
// any call after Close returns an error matching ErrClosed. Close an
// engine (package engine) or a Context before their Model: closed under
// them, their calls fail with ErrClosed saying so. Batches are plain Go
// memory and need no Close.
//
// # Sampling
//
// A SamplerChain ends with a sampler that picks the token (Greedy, Dist,
// Mirostat, MirostatV2, AdaptiveP, or a Go SelectingSampler); the others
// (TopK, Temp, grammars, ...) narrow or reweigh the candidates before it,
// and NewSamplerChain refuses a chain that would pick nothing. A seed
// repeats the random draws, and the text only when the decodes are the
// same (see Dist). Generate and GenerateTokens return a Generation: range
// over its Seq, then read its Reason and Stats (token counts and speed).
//
// # Errors
//
// Every error is an *Error with a Code (errors.As), and matches sentinels
// such as ErrInvalid, ErrClosed and ErrCanceled with errors.Is. Arguments
// are checked before they reach C: token ids, batch sizes, positions,
// sequence ids and output indices out of range are errors, not crashes.
//
// # Cancellation
//
// Decode, Encode, Generate and LoadModel take a context.Context. Its end
// interrupts llama.cpp mid-computation through its abort callback; a
// cancelled Decode removes what it had added to memory, so the Context is
// as it was before the call.
//
// # Speculative generation
//
// GenerateOptions.Speculative makes each decode check a draft of several
// tokens, so one decode can yield several pieces; the pieces are those of
// plain generation, greedy or sampled. Drafts come from a Drafter; package
// draft has those of llama.cpp: a small model of the same vocabulary
// (draft.NewModel) or the text so far (draft.NgramSimple, draft.NgramMap,
// draft.NgramCache with llama.cpp's lookup files).
// Drafting adapts to what the target keeps (DraftAdapt): a drafter whose
// drafts are mostly rejected sits out for longer and longer, so
// speculation costs little where it does not help; a loop of one's own
// gets the same policy by wrapping drafters in AdaptiveDrafter.
//
// # Backend sampling
//
// Context.SetSampler attaches a SamplerChain to a sequence so that it runs
// inside the decode's graph on the compute threads (llama-server's
// --backend-sampling): the decode yields the chosen token instead of a row
// of logits, and the chain's Sample returns it. Only chains llama.cpp can
// run there qualify (Offloadable), llama.cpp prepares a chain for this once
// (attached, a chain samples only there until closed), and the sequence's
// logits are then not computed. On a 2-core CPU it measured the same
// throughput as sampling on the CPU at 8 streams and about 5% more at one.
//
// # Sampling several sequences
//
// After one decode of several sequences, Context.SampleParallel samples
// each sequence's row with its own chain over several goroutines: the
// tokens are those of Sample called job after job. It pays where cores
// are free while the compute threads wait; on a machine whose cores the
// compute threads fill, waking a helper costs the next decode more than
// the sampling it takes over.
//
// # Compute threads
//
// ContextOptions.Threads and ThreadsBatch size ggml's threadpools, which
// a Context keeps for its life; ThreadPool and ThreadPoolBatch set their
// priority, polling and CPUs (llama-server's --prio, --poll, --cpu-mask,
// --cpu-strict). After a decode the threads poll for the next one for a
// while; Context.Idle puts them to sleep at once, and ThreadPool.Poll -1
// after every decode. A decode also computes on the calling goroutine's
// thread, which gets the pool's priority and CPUs for the call only.
//
// # The C heap
//
// llama.cpp allocates with the C library's malloc, and Go runs its calls
// on whichever thread is free. glibc gives each thread that allocates an
// arena of its own, up to eight per core, each keeping what was freed in
// it, so a process's resident size can grow by an arena for each thread
// that ran a call allocating much (a grammar's pass over a large
// vocabulary: tens of MB). So the package, when initialized, caps the
// arenas at 2 (mallopt M_ARENA_MAX; MALLOC_ARENA_MAX or
// glibc.malloc.arena_max in GLIBC_TUNABLES, when set, win), engines run
// their grammars' whole-row passes on one thread of their own, and
// TrimMemory returns the heap's free pages to the system, as an idle
// engine does (engine.Options.TrimIdle). Other C libraries are left as
// they are.
//
// # Logging
//
// llama.cpp's log is dropped unless SetLogger gives it a *slog.Logger.
package llama
