package mtmdcapi

import (
	"testing"

	"github.com/x/llama/internal/testenv"
)

// layouts pairs each Go mirror with its C struct and the C names of its
// fields, in order.
var layouts = []testenv.CStruct{
	{C: "struct mtmd_context_params", GoType: ContextParams{}, Fields: []string{"use_gpu", "device", "print_timings", "n_threads",
		"image_marker", "media_marker", "flash_attn_type", "warmup", "image_min_tokens", "image_max_tokens",
		"cb_eval", "cb_eval_user_data", "batch_max_tokens", "progress_callback", "progress_callback_user_data"}},
	{C: "struct mtmd_input_text", GoType: InputText{}, Fields: []string{"text", "text_len", "add_special", "parse_special"}},
	{C: "struct mtmd_input_part", GoType: InputPart{}, Fields: []string{"text", "bitmap"}},
	{C: "struct mtmd_helper_video_init_params", GoType: VideoInitParams{}, Fields: []string{"fps_target", "ffmpeg_bin_dir",
		"timestamp_interval_ms"}},
	{C: "struct mtmd_helper_init_opt", GoType: HelperInitOpt{}, Fields: []string{"video_params"}},
	{C: "struct mtmd_helper_bitmap_wrapper", GoType: BitmapWrapper{}, Fields: []string{"bitmap", "video_ctx"}},
}

// TestStructLayout compiles a probe against the pinned mtmd.h and
// mtmd-helper.h and holds the size, alignment and every field offset and
// size of each Go mirror against what the C compiler says.
func TestStructLayout(t *testing.T) {
	testenv.CheckLayouts(t, []string{"mtmd.h", "mtmd-helper.h"}, []string{"tools/mtmd", "include", "ggml/include"}, layouts)
}
