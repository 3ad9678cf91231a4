package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/x/llama/engine"
	"github.com/x/llama/hub"
	"github.com/x/llama/server"
)

// hfFlags are llama-server's Hugging Face flags: -hf/-hfr/--hf-repo
// (LLAMA_ARG_HF_REPO), -hff/--hf-file (LLAMA_ARG_HF_FILE), -hft/--hf-token
// (HF_TOKEN) and --offline (LLAMA_ARG_OFFLINE). $MODEL_ENDPOINT and
// $HF_ENDPOINT are read by hub.Pull itself.
type hfFlags struct {
	Repo, File, Token string
	Offline           bool
}

// pullHF makes the -hf model local before the server starts, as
// llama-server does: it pulls the repo's model (every split part) into the
// Hugging Face cache, with a progress bar on progress, and points o.Model
// at it, naming the model after the repo reference (llama-server's model
// name with -hf) unless an alias is set. A preset repo (preset.ini at its
// root) starts router mode with that preset instead. Without -hf it does
// nothing.
func pullHF(ctx context.Context, f hfFlags, o *server.Options, progress io.Writer) error {
	if f.Repo == "" {
		return nil
	}
	// With draft-mtp and no -md, the MTP head the repo ships beside the
	// model comes too, as with llama-server.
	sd := &o.Engine.Speculative
	mtp := slices.Contains(sd.Types, engine.SpecDraftMTP) && sd.DraftModel == ""
	res, err := hub.PullFiles(ctx, f.Repo, hub.Options{File: f.File, Token: f.Token, Offline: f.Offline, MTP: mtp,
		Progress: hub.ProgressBar(progress)})
	if err != nil {
		return err
	}
	if res.Preset != "" {
		o.Model, o.ModelsPreset = "", res.Preset
		return nil
	}
	if res.Model == "" {
		return fmt.Errorf("the repo has no GGUF model, only an MTP head")
	}
	o.Model = res.Model
	if mtp && res.MTP != "" {
		sd.DraftModel = res.MTP
	}
	if o.Alias == "" {
		o.Alias = f.Repo
	}
	return nil
}
