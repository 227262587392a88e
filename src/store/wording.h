/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Questions that differ only in wording (API.md 9.2, "Grouping"): pure,
 * deterministic, no locale and no I/O.
 *
 * A question's key is its content words: the text case-folded (ASCII and
 * the Latin letters of U+00C0..U+017F), every character that is not a
 * letter or digit a separator, the stop words of English, German, French
 * and Spanish dropped, each word lightly stemmed (English plurals and
 * possessives: "policies" -> "policy", "visitors" -> "visitor",
 * "parking's" -> "parking"), then the distinct words sorted and joined by
 * one space. "What is the parking policy?" and "the Parking POLICY" both
 * have the key "parking policy". A question of stop words only keeps them
 * (so that it is not the empty key). */

/* The longest key kept: longer questions are cut at a word boundary. */
#define WORDING_KEY_MAX_BYTES 512

/* The key of question (UTF-8; invalid bytes are separators). Returns 0 and
 * a new string in *ret (the caller frees it; "" for a question without a
 * letter or digit), -ENOMEM. */
int wording_key(const char *question, char **ret);

/* The Jaccard similarity of two keys' word sets, |A and B| / |A or B|,
 * 0..1; two empty keys are 1. */
double wording_similarity(const char *key_a, const char *key_b);

/* Two keys are one group at this similarity or above: "parking policy"
 * and "parking policy visitor" (2/3) are, "parking policy" and "policy
 * travel" (1/3) are not. */
#define WORDING_SIMILARITY_MIN 0.5

/* Greedy grouping: keys[0..n) in the order the caller wants groups to be
 * founded (most asked first). Each key joins the first group, in founding
 * order, whose founding key is similar enough to it (wording_similarity()
 * >= WORDING_SIMILARITY_MIN), else founds a new one. ret_group[i] is key
 * i's group, numbered 0.. in founding order; *ret_n_groups their number.
 * Only groups sharing a word with the key are compared (an index of the
 * founding keys' words), so that n distinct keys cost about n times the
 * groups per word, not n squared. Returns 0, -ENOMEM. */
int wording_group(const char *const *keys, size_t n, size_t *ret_group, size_t *ret_n_groups);
