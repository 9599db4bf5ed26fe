// The scene's lights and their sum over the metal-roughness BRDF, shared by the per-object
// and the batched forward passes (include after brdf.glsl).
uniform vec3 u_camera_pos;
uniform vec3 u_sun_dir;      // direction the light travels
uniform vec3 u_sun_color;    // colour x intensity
uniform vec3 u_ambient;
uniform int u_point_count;
uniform vec4 u_point_pos[4];   // xyz, range
uniform vec3 u_point_color[4]; // colour x intensity

vec3 shade(vec3 n, vec3 world, vec3 base, float rough, float metal, vec3 emissive) {
    vec3 v = normalize(u_camera_pos - world);
    vec3 color = u_ambient * base * (1.0 - 0.5 * metal) + emissive;
    color += brdf(n, v, normalize(-u_sun_dir), base, rough, metal) * u_sun_color;
    for (int i = 0; i < u_point_count; ++i) {
        vec3 d = u_point_pos[i].xyz - world;
        float dist = length(d);
        float fall = clamp(1.0 - pow(dist / u_point_pos[i].w, 4.0), 0.0, 1.0);
        float atten = fall * fall / (dist * dist + 1.0);
        color += brdf(n, v, d / max(dist, 1e-4), base, rough, metal)
                 * u_point_color[i] * atten;
    }
    return color;
}
