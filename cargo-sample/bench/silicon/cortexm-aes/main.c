/* Calls each routine of github.com/jnk0le/cortexm-AES whose cycles its author measured on a
   board, once, from a wrapper of its own (`t_<name>`), then exits through semihosting.
   cargo-sample counts and times every instruction; a routine's cycles for that call are its
   wrapper's inclusive cycles less the wrapper's own. Build with -fno-optimize-sibling-calls so
   that every wrapper calls (not jumps to) its routine. */
#include <stddef.h>
#include <stdint.h>

#define ROUTINES(X)                                                                          \
    X(CM0_sBOX_AES128_keyschedule_enc, (uint8_t *, const uint8_t *))                         \
    X(CM0_sBOX_AES256_keyschedule_enc, (uint8_t *, const uint8_t *))                         \
    X(CM0_sBOX_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))           \
    X(CM0_sBOX_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))           \
    X(CM0_FASTMULsBOX_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))    \
    X(CM0_FASTMULsBOX_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))    \
    X(CM0_FASTMULsBOX_OTFKS_AES128_encrypt, (const uint8_t *, const uint8_t *, uint8_t *))   \
    X(CM0_FASTMULsBOX_OTFKS_AES256_encrypt, (const uint8_t *, const uint8_t *, uint8_t *))   \
    X(CM0_d4T_AES128_keyschedule_enc, (uint8_t *, const uint8_t *))                          \
    X(CM0_d4T_AES256_keyschedule_enc, (uint8_t *, const uint8_t *))                          \
    X(CM0_d4T_AES_keyschedule_dec, (uint8_t *, size_t))                                      \
    X(CM0_d4T_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))            \
    X(CM0_d4T_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))            \
    X(CM0_d4T_FAST_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))       \
    X(CM3_1T_AES128_keyschedule_enc, (uint8_t *, const uint8_t *))                           \
    X(CM3_1T_AES256_keyschedule_enc, (uint8_t *, const uint8_t *))                           \
    X(CM3_1T_AES_keyschedule_dec, (uint8_t *, size_t))                                       \
    X(CM3_1T_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))             \
    X(CM3_1T_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))             \
    X(CM3_1T_AES128_encrypt_unrolled, (const uint8_t *, const uint8_t *, uint8_t *))         \
    X(CM3_1T_AES256_encrypt_unrolled, (const uint8_t *, const uint8_t *, uint8_t *))         \
    X(CM3_1T_AES128_decrypt_unrolled, (const uint8_t *, const uint8_t *, uint8_t *))         \
    X(CM3_1T_AES256_decrypt_unrolled, (const uint8_t *, const uint8_t *, uint8_t *))         \
    X(CM4_DSPsBOX_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))        \
    X(CM4_DSPsBOX_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))        \
    X(CM7_1T_AES128_keyschedule_enc, (uint8_t *, const uint8_t *))                           \
    X(CM7_1T_AES256_keyschedule_enc, (uint8_t *, const uint8_t *))                           \
    X(CM7_1T_AES_keyschedule_dec, (uint8_t *, size_t))                                       \
    X(CM7_1T_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))             \
    X(CM7_1T_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))             \
    X(CM7_DSPsBOX_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))        \
    X(CM33_1T_AES128_keyschedule_enc, (uint8_t *, const uint8_t *))                          \
    X(CM33_1T_AES256_keyschedule_enc, (uint8_t *, const uint8_t *))                          \
    X(CM33_1T_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))            \
    X(CM33_1T_AES_decrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))            \
    X(CM33_d4T_AES_encrypt, (const uint8_t *, const uint8_t *, uint8_t *, size_t))

#define DECLARE(name, args) extern void name args;
ROUTINES(DECLARE)

static uint8_t key[32];
static uint8_t rk[15 * 16];
static uint8_t rk_dec[15 * 16];
static uint8_t in[16];
static uint8_t out[16];

/* One wrapper per measured call: `t_<routine>_<key bits>`. */
#define KS(name, bits)                                                                       \
    __attribute__((noinline)) void t_##name##_##bits(void) { name(rk, key); }
#define KSDEC(name, bits, rounds)                                                            \
    __attribute__((noinline)) void t_##name##_##bits(void) { name(rk_dec, rounds); }
#define ENC(name, bits, rounds)                                                              \
    __attribute__((noinline)) void t_##name##_##bits(void) { name(rk, in, out, rounds); }
#define DEC(name, bits, rounds)                                                              \
    __attribute__((noinline)) void t_##name##_##bits(void) { name(rk_dec, in, out, rounds); }
#define FIXED(name, bits, k)                                                                 \
    __attribute__((noinline)) void t_##name##_##bits(void) { name(k, in, out); }

KS(CM0_sBOX_AES128_keyschedule_enc, 128)
KS(CM0_sBOX_AES256_keyschedule_enc, 256)
ENC(CM0_sBOX_AES_encrypt, 128, 10)
ENC(CM0_sBOX_AES_encrypt, 256, 14)
ENC(CM0_sBOX_AES_decrypt, 128, 10) /* the sBOX variants decrypt with the encryption key */
ENC(CM0_sBOX_AES_decrypt, 256, 14)
ENC(CM0_FASTMULsBOX_AES_encrypt, 128, 10)
ENC(CM0_FASTMULsBOX_AES_encrypt, 256, 14)
ENC(CM0_FASTMULsBOX_AES_decrypt, 128, 10)
ENC(CM0_FASTMULsBOX_AES_decrypt, 256, 14)
FIXED(CM0_FASTMULsBOX_OTFKS_AES128_encrypt, 128, key)
FIXED(CM0_FASTMULsBOX_OTFKS_AES256_encrypt, 256, key)
KS(CM0_d4T_AES128_keyschedule_enc, 128)
KS(CM0_d4T_AES256_keyschedule_enc, 256)
KSDEC(CM0_d4T_AES_keyschedule_dec, 128, 10)
KSDEC(CM0_d4T_AES_keyschedule_dec, 256, 14)
ENC(CM0_d4T_AES_encrypt, 128, 10)
ENC(CM0_d4T_AES_encrypt, 256, 14)
DEC(CM0_d4T_AES_decrypt, 128, 10)
DEC(CM0_d4T_AES_decrypt, 256, 14)
ENC(CM0_d4T_FAST_AES_encrypt, 128, 10)
ENC(CM0_d4T_FAST_AES_encrypt, 256, 14)
KS(CM3_1T_AES128_keyschedule_enc, 128)
KS(CM3_1T_AES256_keyschedule_enc, 256)
KSDEC(CM3_1T_AES_keyschedule_dec, 128, 10)
KSDEC(CM3_1T_AES_keyschedule_dec, 256, 14)
ENC(CM3_1T_AES_encrypt, 128, 10)
ENC(CM3_1T_AES_encrypt, 256, 14)
DEC(CM3_1T_AES_decrypt, 128, 10)
DEC(CM3_1T_AES_decrypt, 256, 14)
FIXED(CM3_1T_AES128_encrypt_unrolled, 128, rk)
FIXED(CM3_1T_AES256_encrypt_unrolled, 256, rk)
FIXED(CM3_1T_AES128_decrypt_unrolled, 128, rk_dec)
FIXED(CM3_1T_AES256_decrypt_unrolled, 256, rk_dec)
ENC(CM4_DSPsBOX_AES_encrypt, 128, 10)
ENC(CM4_DSPsBOX_AES_encrypt, 256, 14)
ENC(CM4_DSPsBOX_AES_decrypt, 128, 10)
ENC(CM4_DSPsBOX_AES_decrypt, 256, 14)
KS(CM7_1T_AES128_keyschedule_enc, 128)
KS(CM7_1T_AES256_keyschedule_enc, 256)
KSDEC(CM7_1T_AES_keyschedule_dec, 128, 10)
KSDEC(CM7_1T_AES_keyschedule_dec, 256, 14)
ENC(CM7_1T_AES_encrypt, 128, 10)
ENC(CM7_1T_AES_encrypt, 256, 14)
DEC(CM7_1T_AES_decrypt, 128, 10)
DEC(CM7_1T_AES_decrypt, 256, 14)
ENC(CM7_DSPsBOX_AES_encrypt, 128, 10)
ENC(CM7_DSPsBOX_AES_encrypt, 256, 14)
KS(CM33_1T_AES128_keyschedule_enc, 128)
KS(CM33_1T_AES256_keyschedule_enc, 256)
ENC(CM33_1T_AES_encrypt, 128, 10)
ENC(CM33_1T_AES_encrypt, 256, 14)
ENC(CM33_1T_AES_decrypt, 128, 10)
ENC(CM33_1T_AES_decrypt, 256, 14)
ENC(CM33_d4T_AES_encrypt, 128, 10)
ENC(CM33_d4T_AES_encrypt, 256, 14)

static void copy(uint8_t *dst, const uint8_t *src, size_t n)
{
    while (n--) {
        *dst++ = *src++;
    }
}

static void semihosting_exit(uint32_t code)
{
    register uint32_t r0 __asm__("r0") = 0x18; /* SYS_EXIT */
    register uint32_t r1 __asm__("r1") = code ? 0x20024 : 0x20026;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

/* FIPS-197 appendix C.1: key 00..0f, plaintext 00112233..ff. */
static const uint8_t c1_plain[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
static const uint8_t c1_cipher[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                      0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};

static int same(const uint8_t *a, const uint8_t *b)
{
    for (int i = 0; i < 16; i++) {
        if (a[i] != b[i]) {
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    for (int i = 0; i < 32; i++) {
        key[i] = (uint8_t)i;
    }
    copy(in, c1_plain, 16);
    int bad = 0;

    /* Cortex-M0 family, 128-bit then 256-bit keys. */
    t_CM0_sBOX_AES128_keyschedule_enc_128();
    t_CM0_sBOX_AES_encrypt_128();
    bad |= !same(out, c1_cipher); /* the build is right before anything is compared */
    t_CM0_sBOX_AES_decrypt_128();
    t_CM0_FASTMULsBOX_AES_encrypt_128();
    t_CM0_FASTMULsBOX_AES_decrypt_128();
    t_CM0_sBOX_AES256_keyschedule_enc_256();
    t_CM0_sBOX_AES_encrypt_256();
    t_CM0_sBOX_AES_decrypt_256();
    t_CM0_FASTMULsBOX_AES_encrypt_256();
    t_CM0_FASTMULsBOX_AES_decrypt_256();
    t_CM0_FASTMULsBOX_OTFKS_AES128_encrypt_128();
    bad |= !same(out, c1_cipher);
    t_CM0_FASTMULsBOX_OTFKS_AES256_encrypt_256();
    t_CM0_d4T_AES128_keyschedule_enc_128();
    t_CM0_d4T_AES_encrypt_128();
    bad |= !same(out, c1_cipher);
    t_CM0_d4T_FAST_AES_encrypt_128();
    copy(rk_dec, rk, sizeof rk);
    t_CM0_d4T_AES_keyschedule_dec_128();
    t_CM0_d4T_AES_decrypt_128();
    t_CM0_d4T_AES256_keyschedule_enc_256();
    t_CM0_d4T_AES_encrypt_256();
    t_CM0_d4T_FAST_AES_encrypt_256();
    copy(rk_dec, rk, sizeof rk);
    t_CM0_d4T_AES_keyschedule_dec_256();
    t_CM0_d4T_AES_decrypt_256();

    /* Cortex-M3/M4 (1T), M4 (DSP), M7, M33. */
    t_CM3_1T_AES128_keyschedule_enc_128();
    t_CM3_1T_AES_encrypt_128();
    bad |= !same(out, c1_cipher);
    t_CM3_1T_AES128_encrypt_unrolled_128();
    t_CM4_DSPsBOX_AES_encrypt_128();
    t_CM4_DSPsBOX_AES_decrypt_128();
    t_CM7_1T_AES_encrypt_128();
    t_CM7_DSPsBOX_AES_encrypt_128();
    t_CM33_1T_AES_encrypt_128();
    t_CM33_1T_AES_decrypt_128();
    t_CM33_d4T_AES_encrypt_128();
    copy(rk_dec, rk, sizeof rk);
    t_CM3_1T_AES_keyschedule_dec_128();
    t_CM3_1T_AES_decrypt_128();
    t_CM3_1T_AES128_decrypt_unrolled_128();
    t_CM3_1T_AES256_keyschedule_enc_256();
    t_CM3_1T_AES_encrypt_256();
    t_CM3_1T_AES256_encrypt_unrolled_256();
    t_CM4_DSPsBOX_AES_encrypt_256();
    t_CM4_DSPsBOX_AES_decrypt_256();
    t_CM7_1T_AES_encrypt_256();
    t_CM7_DSPsBOX_AES_encrypt_256();
    t_CM33_1T_AES_encrypt_256();
    t_CM33_1T_AES_decrypt_256();
    t_CM33_d4T_AES_encrypt_256();
    copy(rk_dec, rk, sizeof rk);
    t_CM3_1T_AES_keyschedule_dec_256();
    t_CM3_1T_AES_decrypt_256();
    t_CM3_1T_AES256_decrypt_unrolled_256();
    t_CM7_1T_AES128_keyschedule_enc_128();
    copy(rk_dec, rk, sizeof rk);
    t_CM7_1T_AES_keyschedule_dec_128();
    t_CM7_1T_AES_decrypt_128();
    t_CM7_1T_AES256_keyschedule_enc_256();
    copy(rk_dec, rk, sizeof rk);
    t_CM7_1T_AES_keyschedule_dec_256();
    t_CM7_1T_AES_decrypt_256();
    t_CM33_1T_AES128_keyschedule_enc_128();
    t_CM33_1T_AES256_keyschedule_enc_256();

    semihosting_exit(bad);
    return 0;
}
