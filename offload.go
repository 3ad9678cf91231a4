package llama

import "slices"

// OnGPU reports whether the model's layers run on a GPU: it was loaded with
// layers to offload (not CPUOnly, GPULayers above 0 or the default) and the
// devices it may use (ModelOptions.Devices, else every device the build
// can run on) include a GPU, discrete or integrated. Callers use it to
// pick defaults that pay only where the decode leaves the CPU cores free,
// such as sampling a step's rows on several goroutines. Models split over
// RPC workers report false: their decode runs on other machines' devices,
// whatever they are, and the host's cores are not known to be free.
func (m *Model) OnGPU() bool { return m.onGPU }

// offloadsToGPU says whether a model loaded with nLayers layers to offload
// (llama_model_params.n_gpu_layers) and the devices names (pinned: the
// only ones llama.cpp may use; else every device in devs) runs on a GPU.
func offloadsToGPU(nLayers int32, names []string, pinned bool, devs []Device) bool {
	return nLayers != 0 && len(offloadTargets(devs, names, pinned)) > 0
}

// offloadTargets are the GPUs llama.cpp offloads layers to: those of
// names when pinned, else its default, the discrete GPUs (the integrated
// ones where there is none).
func offloadTargets(devs []Device, names []string, pinned bool) []Device {
	var gpus, igpus []Device
	for _, d := range devs {
		switch {
		case d.Type != "gpu" && d.Type != "igpu":
		case pinned:
			if slices.Contains(names, d.Name) {
				gpus = append(gpus, d)
			}
		case d.Type == "gpu":
			gpus = append(gpus, d)
		default:
			igpus = append(igpus, d)
		}
	}
	if len(gpus) == 0 {
		return igpus
	}
	return gpus
}
