// Checks the workgroup counts of one indirect dispatch against the device's limits before the
// dispatch reads them: counts within the limits are passed on, others become (0, 0, 0) and are
// flagged for the host, which fails the submission. Compiled by scripts/compile-vulkan-shaders.
#version 450

layout(local_size_x = 1) in;

// The dispatch's count buffer, bound from an aligned offset at or before the counts.
layout(set = 0, binding = 0) readonly buffer Source { uint words[]; } source;

// One 8-word entry per indirect dispatch: the counts the dispatch uses (3 words), a flag
// (1 = beyond the limits), and the counts the program asked for (3 words).
layout(set = 0, binding = 1) buffer Guard { uint words[]; } guard;

layout(push_constant) uniform Params {
  uint source_word;
  uint guard_word;
  uint limit_x;
  uint limit_y;
  uint limit_z;
} params;

void main() {
  uint s = params.source_word;
  uvec3 counts = uvec3(source.words[s], source.words[s + 1], source.words[s + 2]);
  bool fits = all(lessThanEqual(counts, uvec3(params.limit_x, params.limit_y, params.limit_z)));
  uvec3 issued = fits ? counts : uvec3(0);
  uint g = params.guard_word;
  guard.words[g] = issued.x;
  guard.words[g + 1] = issued.y;
  guard.words[g + 2] = issued.z;
  guard.words[g + 3] = fits ? 0u : 1u;
  guard.words[g + 4] = counts.x;
  guard.words[g + 5] = counts.y;
  guard.words[g + 6] = counts.z;
}
