#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked on the source text:
#   1. only src/io calls the kernel's I/O interfaces (pread/pwrite and their vector forms,
#      fsync/fdatasync/sync/syncfs/sync_file_range, posix_fadvise, mincore, liburing);
#   2. only src/gpu calls the CUDA driver or runtime or cuFile, or includes NVIDIA's headers.
# It reads src/, capi/ and tools/ (tests/ and examples/ may do anything: the fakes and reference
# readers live there). Comments and string literals are ignored, so "--fsync" or a message naming
# cuFileRead is no call. capi/ implements cuFile's C API over libsluice: its cuFile* and
# cufileop_* names are its own functions (defined there, or called within libsluice_cufile),
# never NVIDIA's, and abi/cufile.h, the header declaring them as NVIDIA's does (including
# <cuda.h> where present), is left out; a CUDA call in capi/ still counts.
#
# usage: check-layering.sh SOURCE_ROOT    exit 0: clean; 1: violations (each printed as
#                                         file:line: rule: text); 2: usage
set -euo pipefail
root=${1:?usage: check-layering.sh SOURCE_ROOT}
cd "$root"
[[ -d src/io && -d src/gpu ]] || { echo "check-layering: $root has no src/io and src/gpu" >&2; exit 2; }

mapfile -t files < <(find src abi capi tools -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' \
                       -o -name '*.h' -o -name '*.hpp' \) ! -path abi/cufile.h | sort)
[[ ${#files[@]} -gt 0 ]] || { echo "check-layering: no sources found under $root" >&2; exit 2; }

perl -e '
  my $os = qr/(?<![\w.>:])(?:::)?(?:pread|pwrite|pread64|pwrite64|preadv2?|pwritev2?|fsync|fdatasync|
                                     syncfs|sync_file_range|posix_fadvise|fadvise64|mincore|
                                     io_uring_\w+)\s*\(|::sync\s*\(/x;
  my $cuda = qr/(?<![\w.>:])(?:::)?(?:cu[A-Z]\w*|cuda[A-Z]\w*|cufileop_\w+)\s*\(|
                ^\s*\#\s*include\s*<(?:cuda|cuda_runtime|cuda_runtime_api|cufile)\.h>/x;
  my $bad = 0;
  for my $f (@ARGV) {
    open(my $in, "<", $f) or die "$f: $!";
    local $/;
    my $text = <$in>;
    # Block comments, then string and character literals, then line comments; newlines kept so
    # that line numbers stay right.
    $text =~ s{/\*.*?\*/}{ my $c = $&; $c =~ tr/\n//cd; $c }gse;
    $text =~ s{"(?:[^"\\\n]|\\.)*"}{""}g;
    $text =~ s{\x27(?:[^\x27\\\n]|\\.)+\x27}{\x27\x27}g;
    $text =~ s{//[^\n]*}{}g;
    my $n = 0;
    for my $line (split /\n/, $text, -1) {
      ++$n;
      if ($f !~ m{^src/io/} && $line =~ $os) {
        print "$f:$n: kernel I/O outside src/io: $line\n";
        $bad = 1;
      }
      my $own = $line;
      $own =~ s/(?<![\w.>:])(?:cuFile\w*|cufileop_\w+)(?=\s*\()/own/g if $f =~ m{^capi/};
      if ($f !~ m{^src/gpu/} && $own =~ $cuda) {
        print "$f:$n: CUDA/cuFile outside src/gpu: $line\n";
        $bad = 1;
      }
    }
  }
  exit $bad;
' "${files[@]}" && { echo "check-layering: ${#files[@]} files, no kernel I/O outside src/io, no CUDA/cuFile outside src/gpu"; exit 0; }
exit 1
