package engine

// Speculative decoding in the engine, after llama-server: each generating
// slot with a drafter puts its last sampled token and a draft into the
// shared batch, with outputs at every position; one decode checks the
// drafts of all slots at once; then each slot samples at its positions
// while the samples agree with the draft (llama.cpp's
// common_sampler_sample_and_accept_n rule), keeps what it accepted and
// removes the rest from its sequence's memory. Every token goes through
// sampleNext, the path of plain generation, so stop strings, n_predict,
// end of generation, grammars and n_probs behave the same and the output
// is the one plain generation gives.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
)

// Speculative decoding types, by llama.cpp's --spec-type names.
const (
	SpecNone        = "none"          // no speculative decoding
	SpecDraftSimple = "draft-simple"  // a draft model (SpeculativeOptions.DraftModel)
	SpecNgramSimple = "ngram-simple"  // self-speculation by n-gram lookup (draft.NgramSimple)
	SpecNgramMapK   = "ngram-map-k"   // n-gram lookup remembering accepted lengths (draft.NgramMap)
	SpecNgramMapK4V = "ngram-map-k4v" // the same, counting the continuations of each n-gram (draft.NgramMap with Values)
	SpecNgramMod    = "ngram-mod"     // a hashed n-gram table the slots share (draft.NgramMod; --spec-default)
	SpecNgramCache  = "ngram-cache"   // n-gram statistics and lookup files (draft.NgramCache)
	SpecDraftMTP    = "draft-mtp"     // the model's own multi-token-prediction head (draft.MTP)
)

// specUnsupported are llama.cpp's types this engine does not run: Eagle3,
// DFlash and DSpark need draft models of their own architectures, not
// wired yet.
var specUnsupported = []string{"draft-eagle3", "draft-dflash", "draft-dspark"}

// specPriority is the order in which llama.cpp asks its drafters.
var specPriority = []string{SpecNgramSimple, SpecNgramMapK, SpecNgramMapK4V, SpecNgramMod, SpecNgramCache, SpecDraftSimple, SpecDraftMTP}

// SpeculativeOptions configure speculative decoding
// (Options.Speculative). The zero value turns it off, as
// llama-server without --spec-type.
type SpeculativeOptions struct {
	// Types are llama.cpp's --spec-type names: none, draft-simple,
	// draft-mtp, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod,
	// ngram-cache. The drafters are asked in llama.cpp's order (n-gram
	// types first, then the draft model or the MTP head) and the first
	// draft is used. Empty or "none": off. As llama-server, a DraftModel
	// without Types is loaded and checked but not used, unless it is an
	// MTP head shipped apart from its model (InferTypes), which turns
	// draft-mtp on.
	//
	// draft-mtp drafts with the model's own MTP blocks (draft.MTP): the
	// model must carry them and be loaded with llama.ModelOptions.MTP, or
	// DraftModel be such a head in a file of its own (loaded with MTP).
	// It takes NMax, NMin, PMin and the draft threads, and cannot be
	// combined with draft-simple (llama-server has one draft context). On
	// a recurrent or hybrid model (Qwen3.5) the context keeps NMax
	// snapshots of the recurrent state for it, to take rejected tokens
	// back; longer drafts (all drafts without draft-mtp) go in after a
	// checkpoint of the slot's recurrent state, which a rejection restores
	// before the kept tokens are decoded again, as in llama-server (a
	// recurrent draft model's context checkpoints its own state too, see
	// draft.Model). Other llama.cpp types (draft-eagle3, draft-dflash, draft-dspark)
	// make New fail.
	Types []string
	// DraftModel is the draft model file (-md, --spec-draft-model), needed
	// by draft-simple; its vocabulary must match the target's
	// (draft.CheckCompatible). DraftModelOptions load it (-ngld:
	// GPULayers; -devd none: CPUOnly).
	DraftModel        string
	DraftModelOptions llama.ModelOptions
	// DraftThreads and DraftThreadsBatch are -td and -tbd (0: the target's
	// Threads and ThreadsBatch). DraftTypeK and DraftTypeV are -ctkd and
	// -ctvd ("": f16). The draft context has the target's context size,
	// batch sizes and one sequence per slot.
	DraftThreads, DraftThreadsBatch int
	DraftTypeK, DraftTypeV          string
	// DraftThreadPool and DraftThreadPoolBatch place the draft context's
	// compute threads (-Cd, --prio-draft, --poll-draft... and their
	// -batch forms); nil: the target's ThreadPool and ThreadPoolBatch.
	DraftThreadPool, DraftThreadPoolBatch *llama.ThreadPoolOptions
	// NMax is the most tokens a draft model drafts at once
	// (--spec-draft-n-max, default 3); NMin drops shorter drafts
	// (--spec-draft-n-min); PMin stops a draft at a token the draft model
	// gives less probability (--spec-draft-p-min, 0: never). PSplit
	// (--spec-draft-p-split) is accepted and unused, as in llama-server.
	NMax, NMin   int
	PMin, PSplit float32
	// NgramSimpleSizeN and NgramSimpleSizeM are --spec-ngram-simple-size-n
	// and -m (defaults 12 and 48); NgramMapKSizeN and NgramMapKSizeM
	// --spec-ngram-map-k-size-n and -m, and NgramMapK4VSizeN,
	// NgramMapK4VSizeM and NgramMapK4VMinHits --spec-ngram-map-k4v-size-n,
	// -m and -min-hits (same defaults; min hits 1). Each slot keeps its
	// ngram-map statistics from one request to the next, as llama-server.
	NgramSimpleSizeN, NgramSimpleSizeM                     int
	NgramMapKSizeN, NgramMapKSizeM                         int
	NgramMapK4VSizeN, NgramMapK4VSizeM, NgramMapK4VMinHits int
	// NgramModNMatch is ngram-mod's n-gram length
	// (--spec-ngram-mod-n-match, default 24), and NgramModNMin and
	// NgramModNMax its fewest and most tokens of a draft
	// (--spec-ngram-mod-n-min and -n-max, defaults 48 and 64; see
	// draft.NgramMod for negative values). The slots share one table of
	// 16 MiB.
	NgramModNMatch, NgramModNMin, NgramModNMax int
	// LookupCacheStatic and LookupCacheDynamic are llama.cpp lookup files
	// for ngram-cache (-lcs, -lcd; read only, as llama-server).
	LookupCacheStatic, LookupCacheDynamic string
	// NewDrafters, when set, gives each completion request drafters of the
	// caller's (a lookup in a corpus of the application's, say), asked
	// after those of Types and adapted like them; it turns speculative
	// decoding on even without Types. It runs on the engine's loop when
	// the request starts in slot slot, and the drafters' methods run there
	// too; a panic in any of them ends that request alone, with the panic
	// as its error. Nil drafters in its result are skipped.
	NewDrafters func(slot int, req *Request) []llama.Drafter
	// Adapt is how each slot's drafters adapt to acceptance
	// (llama.AdaptiveDrafter; the zero value adapts: a drafter whose
	// drafts do not pay sits out a while, so speculation costs little where
	// it does not help). Adapt.Off drafts as llama-server does, whose
	// timings.draft_n and draft_n_accepted this then matches.
	Adapt llama.DraftAdapt

	inferred bool // InferTypes set Types
}

// InferTypes sets Types to draft-mtp, and reports whether it did, when
// Types names no type and DraftModel is a file whose last block is an MTP
// block (an MTP head shipped apart from its model), as llama-server does
// for -md without --spec-type. New does the same; a caller that reports
// the types (TypesString) calls it first.
func (o *SpeculativeOptions) InferTypes() bool {
	if ts, err := o.specTypes(); err != nil || len(ts) > 0 || o.DraftModel == "" || !isMTPFile(o.DraftModel) {
		return false
	}
	o.Types, o.inferred = []string{SpecDraftMTP}, true
	return true
}

// mtpNMax is draft-mtp's most tokens a draft: NMax, default 3.
func (o *SpeculativeOptions) mtpNMax() int {
	if o.NMax > 0 {
		return o.NMax
	}
	return 3
}

// recurrentSnapshots is the RecurrentSnapshots the engine's context of a
// model with a recurrent memory needs for o (after InferTypes):
// draft-mtp's NMax, as llama-server gives its target context; 0 otherwise.
func (o *SpeculativeOptions) recurrentSnapshots(m *llama.Model) int {
	info, err := m.Info()
	if err != nil || !info.Recurrent && !info.Hybrid {
		return 0
	}
	if ts, err := o.specTypes(); err != nil || !slices.Contains(ts, SpecDraftMTP) {
		return 0
	}
	return o.mtpNMax()
}

// isMTPFile reports whether the GGUF file at path carries an MTP block in
// its last block, llama.cpp's test for a draft file that is an MTP head.
func isMTPFile(path string) bool {
	f, err := gguf.Open(path)
	if err != nil {
		return false
	}
	n, ok := f.Uint32(f.Architecture() + ".block_count")
	if !ok || n == 0 {
		return false
	}
	_, ok = f.Tensor(fmt.Sprintf("blk.%d.nextn.eh_proj.weight", n-1))
	return ok
}

// specTypes validates o.Types and returns the enabled types in llama.cpp's
// order of priority (nil: off).
func (o *SpeculativeOptions) specTypes() ([]string, error) {
	on := map[string]bool{}
	for _, t := range o.Types {
		for _, name := range strings.Split(t, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == SpecNone:
				return nil, nil
			case containsStr(specPriority, name):
				on[name] = true
			case containsStr(specUnsupported, name):
				return nil, fmt.Errorf("engine: speculative type %q is not supported: %w", name, llama.ErrUnsupported)
			default:
				return nil, fmt.Errorf("engine: unknown speculative type %q: %w", name, llama.ErrInvalid)
			}
		}
	}
	var out []string
	for _, t := range specPriority {
		if on[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// TypesString is the types as llama-server reports them in
// generation_settings ("speculative.types"): "none" when off, else "none"
// followed by the names in the order given (its list starts with its
// default), or "draft-mtp" alone when InferTypes chose it.
func (o *SpeculativeOptions) TypesString() string {
	ts, err := o.specTypes()
	if err != nil || len(ts) == 0 {
		return SpecNone
	}
	if o.inferred {
		return SpecDraftMTP
	}
	names := []string{SpecNone}
	for _, t := range o.Types {
		for _, name := range strings.Split(t, ",") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return strings.Join(names, ",")
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// engSpec is the engine's speculative state: the draft model and context
// (shared by the slots, one sequence each) and the lookup statistics.
type engSpec struct {
	types   []string
	draftM  *llama.Model
	draftC  *llama.Context
	static  *draft.NgramStats
	dynamic *draft.NgramStats
	mod     *draft.NgramModTable // ngram-mod's, shared by the slots
	drafts  []*draft.Model       // by slot: its sequence of draftC
	// By slot, the n-gram drafters whose state outlives a request, as
	// llama-server's: ngram-mod's acceptance streak, the maps' statistics.
	mods   []*draft.NgramMod
	mapK   []*draft.NgramMap
	mapK4V []*draft.NgramMap
	// draft-mtp's drafter, over the engine's context.
	mtp *draft.MTP
	// rollback is the engine context's Memory.RollbackLimit: a longer
	// draft needs a checkpoint (-1: none ever does).
	rollback int
	// A step's draft-model and MTP requests and their slots (scratch).
	reqs    []*draft.ModelRequest
	mreqs   []*draft.MTPRequest
	waiting []*engSlot
}

// newEngSpec loads what o needs for the engine's context lctx; nil when
// speculative decoding is off.
func newEngSpec(m *llama.Model, lctx *llama.Context, eo Options) (*engSpec, error) {
	o := eo.Speculative
	types, err := o.specTypes()
	if err != nil {
		return nil, err
	}
	if o.NMax < 0 {
		return nil, fmt.Errorf("engine: speculative n_max %d < 0: %w", o.NMax, llama.ErrInvalid)
	}
	if o.PMin < 0 || o.PMin > 1 {
		return nil, fmt.Errorf("engine: speculative p_min %g out of [0, 1]: %w", o.PMin, llama.ErrInvalid)
	}
	wantDraft := containsStr(types, SpecDraftSimple)
	if wantDraft && o.DraftModel == "" {
		return nil, fmt.Errorf("engine: speculative type draft-simple needs a draft model: %w", llama.ErrInvalid)
	}
	wantMTP := containsStr(types, SpecDraftMTP)
	if wantMTP && wantDraft {
		return nil, fmt.Errorf("engine: speculative types draft-mtp and draft-simple cannot be combined: %w", llama.ErrInvalid)
	}
	if eo.Embedding || eo.Reranking {
		return nil, nil
	}
	sp := &engSpec{types: types}
	fail := func(err error) (*engSpec, error) {
		sp.close()
		return nil, err
	}
	if o.DraftModel != "" {
		mo := o.DraftModelOptions
		mo.MTP = mo.MTP || wantMTP
		if sp.draftM, err = llama.LoadModel(context.Background(), o.DraftModel, mo); err != nil {
			return fail(fmt.Errorf("engine: load draft model: %w", err))
		}
		if err := draft.CheckCompatible(m, sp.draftM); err != nil {
			return fail(err)
		}
	}
	// A recurrent memory (Qwen3.5's hybrid one) takes back as many tokens
	// as the context keeps snapshots (RecurrentSnapshots, which New sets
	// to draft-mtp's NMax, as llama-server does); a longer draft goes in
	// after a checkpoint of the slot's state (see specPut).
	sp.rollback = lctx.Memory().RollbackLimit()
	if len(types) == 0 && o.NewDrafters == nil {
		sp.close()
		return nil, nil
	}
	if wantMTP {
		th, thb := o.DraftThreads, o.DraftThreadsBatch
		if th <= 0 {
			th, thb = eo.Context.Threads, eo.Context.ThreadsBatch
		}
		if sp.mtp, err = draft.NewMTP(lctx, draft.MTPOptions{NMax: o.NMax, NMin: o.NMin, PMin: o.PMin, Model: sp.draftM,
			Context: llama.ContextOptions{Threads: th, ThreadsBatch: thb, FlashAttention: eo.Context.FlashAttention,
				TypeK: o.DraftTypeK, TypeV: o.DraftTypeV, ThreadPool: eo.Context.ThreadPool, ThreadPoolBatch: eo.Context.ThreadPoolBatch}}); err != nil {
			return fail(fmt.Errorf("engine: draft-mtp: %w", err))
		}
	}
	if wantDraft {
		th, thb := o.DraftThreads, o.DraftThreadsBatch
		if th <= 0 {
			th, thb = eo.Context.Threads, eo.Context.ThreadsBatch
		}
		pool, poolBatch := eo.Context.ThreadPool, eo.Context.ThreadPoolBatch
		if o.DraftThreadPool != nil {
			pool, poolBatch = *o.DraftThreadPool, nil
		}
		if o.DraftThreadPoolBatch != nil {
			poolBatch = o.DraftThreadPoolBatch
		}
		sp.draftC, err = sp.draftM.NewContext(llama.ContextOptions{
			ContextSize: eo.Context.ContextSize, BatchSize: eo.Context.BatchSize, UBatchSize: eo.Context.UBatchSize, Sequences: eo.Parallel,
			Threads: th, ThreadsBatch: thb, FlashAttention: eo.Context.FlashAttention,
			TypeK: o.DraftTypeK, TypeV: o.DraftTypeV, KVUnified: eo.Context.KVUnified,
			ThreadPool: pool, ThreadPoolBatch: poolBatch,
		})
		if err != nil {
			return fail(fmt.Errorf("engine: draft context: %w", err))
		}
		// One drafter per slot, made now: draft.NewModel checks the
		// vocabularies again, which takes a while with large ones.
		for i := range eo.Parallel {
			dm, err := draft.NewModel(m, sp.draftC, draft.ModelOptions{NMax: o.NMax, NMin: o.NMin, PMin: o.PMin, Seq: i})
			if err != nil {
				return fail(err)
			}
			sp.drafts = append(sp.drafts, dm)
		}
	}
	if containsStr(types, SpecNgramCache) {
		if o.LookupCacheStatic != "" {
			if sp.static, err = draft.LoadNgramStats(o.LookupCacheStatic); err != nil {
				return fail(err)
			}
		}
		if o.LookupCacheDynamic != "" {
			if sp.dynamic, err = draft.LoadNgramStats(o.LookupCacheDynamic); err != nil {
				return fail(err)
			}
		}
	}
	if containsStr(types, SpecNgramMod) {
		sp.mod = draft.NewNgramModTable(o.NgramModNMatch)
	}
	for range eo.Parallel {
		if sp.mod != nil {
			sp.mods = append(sp.mods, &draft.NgramMod{Table: sp.mod, NMin: o.NgramModNMin, NMax: o.NgramModNMax})
		}
		if containsStr(types, SpecNgramMapK) {
			sp.mapK = append(sp.mapK, &draft.NgramMap{SizeN: o.NgramMapKSizeN, SizeM: o.NgramMapKSizeM})
		}
		if containsStr(types, SpecNgramMapK4V) {
			sp.mapK4V = append(sp.mapK4V, &draft.NgramMap{SizeN: o.NgramMapK4VSizeN, SizeM: o.NgramMapK4VSizeM,
				Values: true, MinHits: o.NgramMapK4VMinHits})
		}
	}
	sp.types = types
	return sp, nil
}

// resetSlot forgets what slot id's drafters keep: its draft model's
// sequence, and the statistics of its n-gram maps and ngram-mod drafter
// (their shared table stays).
func (sp *engSpec) resetSlot(id int) {
	if sp == nil {
		return
	}
	if id < len(sp.drafts) {
		_ = sp.drafts[id].Reset()
	}
	sp.mtp.Seq(id).Reset()
	for _, maps := range [][]*draft.NgramMap{sp.mapK, sp.mapK4V} {
		if id < len(maps) {
			m := maps[id]
			*m = draft.NgramMap{SizeN: m.SizeN, SizeM: m.SizeM, Values: m.Values, MinHits: m.MinHits}
		}
	}
	if id < len(sp.mods) {
		d := sp.mods[id]
		*d = draft.NgramMod{Table: d.Table, NMin: d.NMin, NMax: d.NMax}
	}
}

// mtpSeq is slot id's draft-mtp drafter; nil without draft-mtp.
func (sp *engSpec) mtpSeq(id int) *draft.MTPSeq {
	if sp == nil {
		return nil
	}
	return sp.mtp.Seq(id)
}

// draftModel and draftContext are the draft model and its context (nil
// without one).
func (sp *engSpec) draftModel() *llama.Model {
	if sp == nil {
		return nil
	}
	return sp.draftM
}

func (sp *engSpec) draftContext() *llama.Context {
	if sp == nil {
		return nil
	}
	return sp.draftC
}

func (sp *engSpec) close() {
	if sp == nil {
		return
	}
	if sp.mtp != nil {
		sp.mtp.Close()
		sp.mtp = nil
	}
	if sp.draftC != nil {
		sp.draftC.Close()
		sp.draftC = nil
	}
	if sp.draftM != nil {
		sp.draftM.Close()
		sp.draftM = nil
	}
}

// engSlotSpec is a slot's speculative state.
type engSlotSpec struct {
	spec    llama.Speculative // the drafters of the running request
	draft   []llama.Token     // the draft in this step's batch
	drafter llama.Drafter
	iFirst  int // batch index of the last sampled token (the draft follows)
	// fault is a drafter's panic in this step's drafting: the step decodes
	// the slot's token and then ends its request.
	fault    *llama.PanicError
	n        int                // the most tokens of this step's draft
	deferAt  int                // the draft model's (or MTP's) index in spec.Drafters when its draft waits for the batch (-1: none)
	req      draft.ModelRequest // its request, for the draft model
	mreq     draft.MTPRequest   // or for the MTP head (mreq.Seq not nil)
	drafted  int                // this request's drafted tokens (timings.draft_n)
	accepted int                // of which accepted (timings.draft_n_accepted)
	checks   int                // drafts checked
	// ck is a checkpoint of the slot's recurrent state (SeqStatePartial)
	// taken before a draft longer than the memory takes back, at ckPos
	// tokens in memory. A rejection restores it, and the tokens kept from
	// ckPos on (replay) go in again before the slot's next token, in a
	// step where the slot drafts nothing, as in llama-server.
	ck     []byte
	ckPos  int
	replay []llama.Token
}

// specStart gives a slot the drafters of its new request, and begins
// the request's sequence in those that keep state (llama.DraftBeginner).
// A panic in a drafter's Begin is returned.
func (e *Engine) specStart(s *engSlot) error {
	s.spec.replay = s.spec.replay[:0]
	sp := e.spec
	if sp == nil {
		return nil
	}
	o := e.opts.Speculative
	ss := &s.spec
	ss.draft, ss.drafter = ss.draft[:0], nil
	ss.drafted, ss.accepted, ss.checks = 0, 0, 0
	ss.spec = llama.Speculative{NMax: s.tk.t.SpecNMax, NMin: s.tk.t.SpecNMin}
	for _, t := range sp.types {
		switch t {
		case SpecNgramSimple:
			ss.spec.Drafters = append(ss.spec.Drafters, &draft.NgramSimple{SizeN: o.NgramSimpleSizeN, SizeM: o.NgramSimpleSizeM})
		case SpecNgramMapK:
			ss.spec.Drafters = append(ss.spec.Drafters, sp.mapK[s.id])
		case SpecNgramMapK4V:
			ss.spec.Drafters = append(ss.spec.Drafters, sp.mapK4V[s.id])
		case SpecNgramMod:
			ss.spec.Drafters = append(ss.spec.Drafters, sp.mods[s.id])
		case SpecNgramCache:
			ss.spec.Drafters = append(ss.spec.Drafters, &draft.NgramCache{Static: sp.static, Dynamic: sp.dynamic})
		case SpecDraftSimple:
			pmin := o.PMin
			if s.tk.t.SpecPMin != nil {
				pmin = *s.tk.t.SpecPMin
			}
			sp.drafts[s.id].SetPMin(pmin)
			ss.spec.Drafters = append(ss.spec.Drafters, sp.drafts[s.id])
		case SpecDraftMTP:
			pmin := o.PMin
			if s.tk.t.SpecPMin != nil {
				pmin = *s.tk.t.SpecPMin
			}
			d := sp.mtp.Seq(s.id)
			d.SetPMin(pmin)
			ss.spec.Drafters = append(ss.spec.Drafters, d)
		}
	}
	if o.NewDrafters != nil {
		for _, d := range o.NewDrafters(s.id, s.tk.t) {
			if d != nil {
				ss.spec.Drafters = append(ss.spec.Drafters, d)
			}
		}
	}
	// As llama-server: the prompt after a context shift's truncation.
	for _, d := range ss.spec.Drafters {
		if b, ok := d.(llama.DraftBeginner); ok {
			if err := beginOne(b, s.prompt); err != nil {
				ss.spec.Drafters = nil
				return err
			}
		}
	}
	if !o.Adapt.Off {
		for i, d := range ss.spec.Drafters {
			ss.spec.Drafters[i] = &llama.AdaptiveDrafter{Drafter: d, Adapt: o.Adapt, NMin: ss.spec.NMin}
		}
	}
	return nil
}

// drafterPanic, deferred by the calls into drafters, sets *err to the
// drafter's panic as a *llama.PanicError.
func drafterPanic(err *error) {
	if v := recover(); v != nil {
		*err = llama.NewPanicError("engine: drafter", v)
	}
}

// beginOne calls b.Begin, returning its panic.
func beginOne(b llama.DraftBeginner, prompt []llama.Token) (err error) {
	defer drafterPanic(&err)
	b.Begin(prompt)
	return nil
}

// specDraftAll drafts for the generating slots of a step, in order, each
// within what its context, n_predict and the batch leave (one position
// spare for a context shift, as llama-server): the n-gram drafters of each
// slot at once, the draft model's drafts of all the slots that reach it
// together, in shared batches (draft.DraftModels), as llama-server drafts
// for its slots. Each slot's s.cache already ends with its last token.
func (e *Engine) specDraftAll(gens []*engSlot) {
	sp := e.spec
	if sp == nil {
		return
	}
	used := 0 // batch positions the earlier slots' drafts may take
	reqs, mreqs, waiting := sp.reqs[:0], sp.mreqs[:0], sp.waiting[:0]
	defer func() { sp.reqs, sp.mreqs, sp.waiting = reqs[:0], mreqs[:0], waiting[:0] }()
	for _, s := range gens {
		ss := &s.spec
		ss.draft, ss.drafter, ss.deferAt = ss.draft[:0], nil, -1
		if s.tk == nil || len(ss.spec.Drafters) == 0 || len(ss.replay) > 0 {
			continue
		}
		t := s.tk.t
		n := min(e.nCtxSlot-(len(s.cache)-1)-2, e.nBatch-len(gens)-used)
		if t.NPredict >= 0 {
			n = min(n, t.NPredict-s.generated-1)
		}
		if ss.spec.NMax > 0 {
			n = min(n, ss.spec.NMax)
		}
		if n <= 0 || n < ss.spec.NMin {
			continue
		}
		ss.n = n
		toks, d, fault := e.specDraftFrom(s, 0, true)
		switch {
		case fault != nil:
			ss.fault = fault
		case ss.deferAt >= 0 && ss.mreq.Seq != nil:
			mreqs, waiting = append(mreqs, &ss.mreq), append(waiting, s)
			used += ss.mreq.Max
		case ss.deferAt >= 0:
			reqs, waiting = append(reqs, &ss.req), append(waiting, s)
			used += ss.req.Max
		default:
			ss.draft, ss.drafter = append(ss.draft, toks...), d
			used += len(toks)
		}
	}
	if len(waiting) == 0 {
		return
	}
	var err, merr error
	if len(reqs) > 0 {
		err = e.draftModels(reqs)
	}
	if len(mreqs) > 0 {
		merr = e.draftMTP(mreqs)
	}
	for _, s := range waiting {
		ss := &s.spec
		err, toks := err, ss.req.Draft
		if ss.mreq.Seq != nil {
			err, toks = merr, ss.mreq.Draft
		}
		if pe, ok := err.(*llama.PanicError); ok {
			ss.fault = pe
			continue
		}
		d := ss.spec.Drafters[ss.deferAt]
		if a, ok := d.(*llama.AdaptiveDrafter); ok && err == nil {
			toks = a.Offer(toks)
		}
		toks = toks[:min(len(toks), ss.n)]
		if len(toks) == 0 {
			// On to the drafters after the draft model.
			var fault *llama.PanicError
			if toks, d, fault = e.specDraftFrom(s, ss.deferAt+1, false); fault != nil {
				ss.fault = fault
				continue
			}
		} else if len(toks) < ss.spec.NMin {
			toks = nil
		}
		if len(toks) > 0 {
			ss.draft, ss.drafter = append(ss.draft, toks...), d
		}
	}
}

// draftModels runs draft.DraftModels, returning its panic as a
// *llama.PanicError.
func (e *Engine) draftModels(reqs []*draft.ModelRequest) (err error) {
	defer drafterPanic(&err)
	return draft.DraftModels(e.baseCtx, reqs)
}

// mtpDecoded shows the MTP head the batch the engine's context has just
// decoded. A failure (or a panic) costs only draft quality: it is logged,
// and the head forgets the batch's sequences.
func (e *Engine) mtpDecoded(b *llama.Batch) {
	err := func() (err error) {
		defer drafterPanic(&err)
		return e.spec.mtp.Decoded(e.baseCtx, b)
	}()
	if err == nil || e.baseCtx.Err() != nil {
		return
	}
	log := e.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("draft-mtp: the MTP head could not follow the batch; its sequences draft afresh", "err", err)
	for i := range b.Len() {
		_, _, seq := b.Token(i)
		e.spec.mtp.Seq(seq).Reset()
	}
}

// mtpMirror makes an edit of slot id's memory (a copy, a shift) to the
// draft-mtp head's too, as llama-server edits both memories together. A
// failure costs drafts only: the head forgets the slot's sequence.
func (e *Engine) mtpMirror(id int, edit func(q *draft.MTPSeq) error) {
	if q := e.spec.mtpSeq(id); q != nil && edit(q) != nil {
		q.Reset()
	}
}

// draftMTP runs draft.MTP.DraftAll, returning its panic as a
// *llama.PanicError.
func (e *Engine) draftMTP(reqs []*draft.MTPRequest) (err error) {
	defer drafterPanic(&err)
	return e.spec.mtp.DraftAll(e.baseCtx, reqs)
}

// specPut puts a slot's draft into the batch after its last token (the
// draft is in memory after the decode; s.cache gets each token only once
// it is accepted). A draft holding a token the model does not have is
// dropped.
func (e *Engine) specPut(s *engSlot) {
	ss := &s.spec
	for _, tok := range ss.draft {
		if e.model.CheckToken(tok) != nil {
			ss.draft, ss.drafter = ss.draft[:0], nil
			return
		}
	}
	ss.ck = ss.ck[:0]
	if e.spec != nil && e.spec.rollback >= 0 && len(ss.draft) > e.spec.rollback {
		// The slot's last token is in this batch too: the checkpoint
		// holds the tokens before it.
		ck, err := e.lctx.AppendSeqStatePartial(ss.ck, s.id)
		if err != nil {
			ss.draft, ss.drafter = ss.draft[:0], nil
			return
		}
		ss.ck, ss.ckPos = ck, len(s.cache)-1
	}
	ss.iFirst = s.iBatch
	for i, tok := range ss.draft {
		e.batch.Add(tok, len(s.cache)+i, s.id, true)
	}
}

// specVerify samples a slot's outputs after the decode: at the last token
// and at each draft token while the samples agree with the draft. Accepted
// tokens stay in memory, the rest is removed.
func (e *Engine) specVerify(s *engSlot) {
	ss := &s.spec
	draft, drafter := ss.draft, ss.drafter
	accepted := 0
	// Counted first, in the request's timings and in the metrics, so that
	// the Done event of a request ending in this loop includes the draft,
	// and Metrics read after it too (a token accepted as the request ends
	// is not counted).
	ss.drafted += len(draft)
	ss.checks++
	e.mu.Lock()
	e.metrics.DraftTokensTotal += int64(len(draft))
	e.metrics.DraftsTotal++
	e.mu.Unlock()
	for i := 0; ; i++ {
		s.iBatch = ss.iFirst + i
		e.sampleNext(s)
		if s.tk == nil || s.state != stGen || i == len(draft) || s.last != draft[i] {
			break
		}
		// The target agrees: draft[i] is in memory already.
		accepted++
		ss.accepted++
		s.cache = append(s.cache, draft[i])
	}
	e.mu.Lock()
	e.metrics.DraftAcceptedTotal += int64(accepted)
	for len(e.metrics.DraftAcceptedPerPos) < len(draft) {
		e.metrics.DraftAcceptedPerPos = append(e.metrics.DraftAcceptedPerPos, 0)
	}
	for i := range accepted {
		e.metrics.DraftAcceptedPerPos[i]++
	}
	e.mu.Unlock()
	drafter.Accepted(accepted)
	if _, q := e.slotDraftModel(s, drafter); q == nil {
		// The head saw the draft go in: it starts from the row of the
		// last kept token whichever drafter drafted (as llama.cpp's
		// draft-mtp, told every verdict).
		e.spec.mtpSeq(s.id).Accepted(accepted)
	}
	ss.draft, ss.drafter = ss.draft[:0], nil
	if accepted == len(draft) {
		return
	}
	if err := e.takeBack(s); err != nil {
		// Memory that cannot drop its tail: forget the sequence (the
		// prompt cache starts afresh); a running request cannot go on.
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		if s.tk != nil {
			e.fail(s, fmt.Errorf("engine: speculative decoding: cannot remove rejected tokens: %w", err))
		}
	}
}

// takeBack leaves in slot s's memory the tokens of s.cache: it removes the
// rejected rest of the draft, or goes back to the draft's checkpoint, when
// there is one, whence the kept tokens go in again in the next step
// (unless the request ended here).
func (e *Engine) takeBack(s *engSlot) error {
	ss := &s.spec
	mem := e.lctx.Memory()
	from := len(s.cache)
	if len(ss.ck) > 0 {
		if err := e.lctx.SetSeqStatePartial(s.id, ss.ck); err != nil {
			return err
		}
		from = ss.ckPos
	}
	if ok, err := mem.Remove(s.id, from, -1); err != nil || !ok {
		if err == nil {
			err = llama.ErrUnsupported
		}
		return err
	}
	if from < len(s.cache) {
		if s.tk != nil && s.state == stGen {
			ss.replay = append(ss.replay[:0], s.cache[from:]...)
		}
		s.cache = s.cache[:from]
	}
	return nil
}

// specDraftFrom asks the slot's drafters, in order from the from-th, for
// at most ss.n tokens following s.cache; the first non-empty draft wins
// (as llama.cpp), within the request's n_min. With deferModel, the slot's
// draft model is not asked: the search stops there, with ss.deferAt its
// index and ss.req the request for draft.DraftModels (unless the drafter
// sits this step out, when the search goes on). A drafter's error counts
// as no draft; a drafter's panic is returned (fault), the request cannot
// go on with a drafter in an unknown state.
func (e *Engine) specDraftFrom(s *engSlot, from int, deferModel bool) (_ []llama.Token, _ llama.Drafter, fault *llama.PanicError) {
	ss := &s.spec
	sp, n, history := &ss.spec, ss.n, s.cache
	ss.mreq.Seq = nil
	for i := from; i < len(sp.Drafters); i++ {
		d := sp.Drafters[i]
		m, q := e.slotDraftModel(s, d)
		if (m != nil || q != nil) && deferModel {
			max := n
			if a, ok := d.(*llama.AdaptiveDrafter); ok {
				max = a.Plan(n)
			}
			if max <= 0 {
				continue
			}
			ss.deferAt = i
			if m != nil {
				ss.req = draft.ModelRequest{Model: m, History: history, Max: max}
			} else {
				ss.mreq = draft.MTPRequest{Seq: q, History: history, Max: max}
			}
			return nil, nil, nil
		}
		toks, err := e.draftOne(d, history, n)
		if pe, ok := err.(*llama.PanicError); ok {
			return nil, nil, pe
		}
		if err != nil {
			continue
		}
		if len(toks) > n {
			toks = toks[:n]
		}
		if len(toks) == 0 {
			continue
		}
		if len(toks) < sp.NMin {
			return nil, nil, nil
		}
		return toks, d, nil
	}
	return nil, nil, nil
}

// slotDraftModel returns the engine's draft model drafter or MTP drafter
// of slot s when d is one of them (wrapped in an AdaptiveDrafter or not),
// else nils.
func (e *Engine) slotDraftModel(s *engSlot, d llama.Drafter) (*draft.Model, *draft.MTPSeq) {
	if e.spec == nil {
		return nil, nil
	}
	if a, ok := d.(*llama.AdaptiveDrafter); ok {
		d = a.Drafter
	}
	if s.id < len(e.spec.drafts) && d == llama.Drafter(e.spec.drafts[s.id]) {
		return e.spec.drafts[s.id], nil
	}
	if q := e.spec.mtp.Seq(s.id); q != nil && d == llama.Drafter(q) {
		return nil, q
	}
	return nil, nil
}

// draftOne asks d for a draft, returning its panic as a *llama.PanicError.
func (e *Engine) draftOne(d llama.Drafter, history []llama.Token, n int) (toks []llama.Token, err error) {
	defer drafterPanic(&err) // a panic leaves toks nil
	return d.Draft(e.baseCtx, history, n)
}

// verifySlot is specVerify for a slot alone: a panic there (in sampling,
// or in the drafter told its verdict) ends the slot's request and no other.
func (e *Engine) verifySlot(s *engSlot) {
	defer e.recoverSlot(s, "engine: speculative check")
	e.specVerify(s)
}
