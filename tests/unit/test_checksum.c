/* The checksums uploads carry (base/crc32c.h, base/digest.h): CRC-32C's check value on the
 * instruction and the table alike (split anywhere), and Content-MD5's base64. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/digest.h"

Test(checksum, crc32c_gives_the_check_value_however_the_bytes_come)
{
    const char *s = "123456789";
    cr_assert_eq(shard_crc32c(0, s, 9), 0xe3069283u);
    for (size_t k = 0; k <= 9; k++)
        cr_assert_eq(shard_crc32c(shard_crc32c(0, s, k), s + k, 9 - k), 0xe3069283u, "split %zu", k);
    char b64[9];
    shard_crc32c_base64(0xe3069283u, b64);
    cr_assert_str_eq(b64, "4waSgw==");
    unsigned char big[1000];
    for (int i = 0; i < 1000; i++)
        big[i] = (unsigned char)(i * 7);
    uint32_t whole = shard_crc32c(0, big, 1000), parts = 0;
    for (int i = 0; i < 1000; i += 13)
        parts = shard_crc32c(parts, big + i, i + 13 <= 1000 ? 13 : (size_t)(1000 - i));
    cr_assert_eq(parts, whole);
}

Test(checksum, md5_base64_is_what_content_md5_wants)
{
    char out[25];
    cr_assert_eq(shard_md5_base64("", 0, out), 0);
    cr_assert_str_eq(out, "1B2M2Y8AsgTpgAmY7PhCfg==");
}
