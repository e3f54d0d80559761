/* Compiles data/tokenizer.h and data/prepare.h with their implementations under the flags
   build.ninja gives (C99 -pedantic, C++11; gcc and clang), with and without MGT_TOK_HF (the hf
   tokenizer, which alone needs PCRE2 and jansson). */
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h"
#include "data/tokenizer.h" /* a second include must be harmless */

int mgt_compile_check_tokenizer(void);
int mgt_compile_check_tokenizer(void) {
    mgt_tokenizer *tok = NULL;
    char err[256];
    if (mgt_tok_open(&tok, "hf", "tokenizer.json", err, sizeof err) != 0) return 1;
    mgt_tok_close(tok);
    return 0;
}
