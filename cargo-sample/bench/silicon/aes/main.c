/* A harness that times nothing itself: it calls each routine once, the way the published
   benchmark called it, and exits through semihosting. cargo-sample counts and times every
   instruction of each call (`--elf ... --cycles`), and the per-call figures are compared with
   the cycles the routine's authors measured on their boards.
   Build with -DVARIANT=1 (AES-128 single block), 2 (AES-128-CTR), 3 (AES-192-CTR),
   4 (AES-256-CTR) or 5 (bitsliced AES-128-CTR). */
#include <stdint.h>

#define LEN (256 * 16)

struct param {
    uint32_t ctr;
    uint8_t nonce[12];
    uint8_t rk[2 * 15 * 16];
};

static uint8_t in[LEN];
static uint8_t out[LEN + 32];
static struct param p;

#if VARIANT == 1
extern void AES_128_keyschedule(const uint8_t *, uint8_t *);
extern void AES_128_encrypt(const uint8_t *, const uint8_t *, uint8_t *);
#define KEY_BYTES 16
#elif VARIANT == 2 || VARIANT == 5
extern void AES_128_keyschedule(const uint8_t *, uint8_t *);
extern void AES_128_encrypt_ctr(const struct param *, const uint8_t *, uint8_t *, uint32_t);
#define KEY_BYTES 16
#elif VARIANT == 3
extern void AES_192_keyschedule(const uint8_t *, uint8_t *);
extern void AES_192_encrypt_ctr(const struct param *, const uint8_t *, uint8_t *, uint32_t);
#define KEY_BYTES 24
#elif VARIANT == 4
extern void AES_256_keyschedule(const uint8_t *, uint8_t *);
extern void AES_256_encrypt_ctr(const struct param *, const uint8_t *, uint8_t *, uint32_t);
#define KEY_BYTES 32
#else
#error "VARIANT must be 1 to 5"
#endif

static void semihosting_exit(uint32_t code)
{
    register uint32_t r0 __asm__("r0") = 0x18; /* SYS_EXIT */
    register uint32_t r1 __asm__("r1") = code ? 0x20024 /* internal error */
                                              : 0x20026 /* application exit */;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

int main(void)
{
    /* FIPS-197 appendix C.1's key and plaintext: a wrong build fails here, not silently. */
    static uint8_t key[32];
    static const uint8_t block[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                      0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    uint32_t i;
    for (i = 0; i < sizeof key; i++) {
        key[i] = (uint8_t)i;
    }
    for (i = 0; i < LEN; i++) {
        in[i] = (uint8_t)(i * 7 + 3);
    }
    for (i = 0; i < 12; i++) {
        p.nonce[i] = (uint8_t)(0x40 + i);
    }
    p.ctr = 0;
#if VARIANT == 5
    for (i = 0; i < KEY_BYTES; i++) {
        p.rk[i] = key[i];
    }
    AES_128_keyschedule(key, p.rk);
#else
    for (i = 0; i < KEY_BYTES; i++) {
        p.rk[i] = key[i];
    }
#endif
#if VARIANT == 1
    AES_128_keyschedule(key, p.rk + 16);
    AES_128_encrypt(p.rk, block, out);
    static const uint8_t want[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                     0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
    for (i = 0; i < 16; i++) {
        if (out[i] != want[i]) {
            semihosting_exit(1);
        }
    }
#elif VARIANT == 2
    AES_128_keyschedule(key, p.rk + 16);
    AES_128_encrypt_ctr(&p, in, out, LEN);
#elif VARIANT == 3
    AES_192_keyschedule(key, p.rk + 24);
    AES_192_encrypt_ctr(&p, in, out, LEN);
#elif VARIANT == 4
    AES_256_keyschedule(key, p.rk + 32);
    AES_256_encrypt_ctr(&p, in, out, LEN);
#elif VARIANT == 5
    AES_128_encrypt_ctr(&p, in, out, LEN);
#endif
    (void)block;
    semihosting_exit(0);
    return 0;
}
