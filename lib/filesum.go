package lib

import "github.com/x/llama/internal/filesum"

// fileSHA256 is the sum the libmtmd and llama-server stamps record.
var fileSHA256 = filesum.SHA256
